#!/usr/bin/env bash
# Deploys the stack for real to a local AWS emulator and checks it (docs/deploy.md, "Deploying to a
# local emulator"), after linting the packaged templates with cfn-lint. Run by .ci/run; locally:
#
#   bash scripts/emulator/deploy.sh
#
# 1. A Python venv with pinned cfn-lint and moto[server] (cached in $CHORIA_PYTHON_DIR, default
#    ~/.cache/choria-provisioner-python; reinstalled only when the pins change).
# 2. `sls package` with the default params and with every optional one; cfn-lint on both templates:
#    any error or warning fails.
# 3. moto's server on a free loopback port; `sls deploy` with every AWS SDK client sent there through
#    AWS_ENDPOINT_URL (osls builds plain AWS SDK v3 clients, which honour it); check_stack.py checks
#    the tables, queues, functions, event source mappings, schedules, roles and the helper layer;
#    `sls remove`; check_stack.py --removed; the emulator is stopped on every exit path.
set -euo pipefail
cd "$(dirname "$0")/../.."

PINS=("cfn-lint==1.58.0" "moto[server]==5.2.5")
venv="${CHORIA_PYTHON_DIR:-$HOME/.cache/choria-provisioner-python}"
if [[ ! -x "$venv/bin/python" ]] || [[ "$(cat "$venv/.pins" 2>/dev/null)" != "${PINS[*]}" ]]; then
  echo "first run: installing ${PINS[*]} into $venv with pip (about a minute, once; reused while these pins stay)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "${PINS[@]}"
  echo "${PINS[*]}" > "$venv/.pins"
fi

work=$(mktemp -d)
moto_pid=""
cleanup() {
  if [[ -n "$moto_pid" ]]; then kill "$moto_pid" 2>/dev/null || true; wait "$moto_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

export AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED=true SLS_TELEMETRY_DISABLED=1
sls=node_modules/.bin/sls
stage=emulator
region=eu-west-1
# Every optional part switched on: a helper layer, shipped and referenced TLS material, VPC, KMS, alarm topic.
# (pausedAlarm=false is a standby's, which names the site's tables; this stack owns and checks its own.)
optional=(
  --param="provisionerConfig=examples/helper-layer/provisioner.yaml"
  --param="helperLayerDir=examples/helper-layer"
  --param="subnetIds=subnet-0123456789abcdef0,subnet-0fedcba9876543210"
  --param="securityGroupIds=sg-0123456789abcdef0"
  --param="secretsKmsKeyArn=arn:aws:kms:$region:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
  --param="alarmTopicArn=arn:aws:sns:$region:123456789012:provisioner-alarms"
)

port=$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$venv/bin/moto_server" -H 127.0.0.1 -p "$port" > "$work/moto.log" 2>&1 &
moto_pid=$!
export AWS_ENDPOINT_URL="http://127.0.0.1:$port" AWS_ACCESS_KEY_ID=emulator AWS_SECRET_ACCESS_KEY=emulator AWS_REGION=$region
for _ in $(seq 1 100); do
  if "$venv/bin/python" -c "import urllib.request; urllib.request.urlopen('$AWS_ENDPOINT_URL/moto-api/')" 2>/dev/null; then break; fi
  kill -0 "$moto_pid" 2>/dev/null || { cat "$work/moto.log" >&2; exit 1; }
  sleep 0.2
done

# Packaging a layer asks CloudFormation for the last deployed layer's hash, so it needs the endpoint too.
echo "== cfn-lint on the packaged templates"
"$sls" package --stage "$stage" --region "$region" --package "$work/default" > "$work/package-default.log" 2>&1 || { cat "$work/package-default.log" >&2; exit 1; }
"$sls" package --stage "$stage" --region "$region" --package "$work/optional" "${optional[@]}" > "$work/package-optional.log" 2>&1 || { cat "$work/package-optional.log" >&2; exit 1; }
"$venv/bin/cfn-lint" --regions "$region" -- "$work/default/cloudformation-template-update-stack.json" "$work/optional/cloudformation-template-update-stack.json"
echo "cfn-lint: 0 errors, 0 warnings on the default and the all-options templates"

echo "== sls deploy to the emulator (moto server on 127.0.0.1:$port)"
"$sls" deploy --stage "$stage" --region "$region" "${optional[@]}" > "$work/deploy.log" 2>&1 || { cat "$work/deploy.log" >&2; exit 1; }
"$venv/bin/python" scripts/emulator/check_stack.py "$stage" "$region"

echo "== sls remove"
"$sls" remove --stage "$stage" --region "$region" "${optional[@]}" > "$work/remove.log" 2>&1 || { cat "$work/remove.log" >&2; exit 1; }
"$venv/bin/python" scripts/emulator/check_stack.py "$stage" "$region" --removed
