#!/usr/bin/env bash
# Runs `sls invoke local` for one function against the services of scripts/local-services.ts or
# of `npm run local -- --keep-running`. Paste the `export` lines either prints first
# (docs/deploy.md). The queue URLs become params, because in a deployment serverless.yml takes
# them from CloudFormation; the tables are named by the stage (SLS_LOCAL_STAGE, default local), as
# both local runs name them. The configuration is PROVISIONER_CONFIG_FILE, else the exported
# PROVISIONER_CONFIG_YAML (what --keep-running prints), else config/local.yaml. Extra arguments go
# to sls, e.g. --data '{"identities":["node1.local.example.net"]}' or --path event.json
# (scripts/sqs-event.ts builds SQS events).
#
#   scripts/sls-local.sh status
#   scripts/sls-local.sh reprovision --data '{"identities":["node1.local.example.net"]}'
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 <function> [sls invoke local options]" >&2
  exit 2
fi
function_name=$1
shift

for name in HOST_WORK_QUEUE_URL HOST_WORK_DLQ_URL LIFECYCLE_QUEUE_URL LIFECYCLE_DLQ_URL DYNAMODB_ENDPOINT SQS_ENDPOINT; do
  if [[ -z "${!name:-}" ]]; then
    echo "$name is not set: start scripts/local-services.ts and paste its export lines" >&2
    exit 2
  fi
done

for name in LEASE_TABLE ADMISSION_TABLE; do
  expected="choria-provisioner-${SLS_LOCAL_STAGE:-local}-$([[ $name == LEASE_TABLE ]] && echo lease || echo admission)"
  if [[ -n "${!name:-}" && "${!name}" != "$expected" ]]; then
    echo "$name is ${!name} but stage ${SLS_LOCAL_STAGE:-local} names it $expected: set SLS_LOCAL_STAGE to the stage the services were started with" >&2
    exit 2
  fi
done

cd "$(dirname "$0")/.."
config_file=${PROVISIONER_CONFIG_FILE:-config/local.yaml}
if [[ -z "${PROVISIONER_CONFIG_FILE:-}" && -n "${PROVISIONER_CONFIG_YAML:-}" ]]; then
  config_file=$(mktemp --suffix=.yaml)
  trap 'rm -f "$config_file"' EXIT
  printf '%s\n' "$PROVISIONER_CONFIG_YAML" >"$config_file"
fi
# sls invoke local runs the bundle from .esbuild/.build, so a relative helper path would not resolve.
export PROVISIONER_HELPER="${PROVISIONER_HELPER:-node $PWD/examples/helpers/provision-helper.mjs}"
export AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED=true
export SLS_TELEMETRY_DISABLED=1
node_modules/.bin/sls invoke local \
  --function "$function_name" \
  --stage "${SLS_LOCAL_STAGE:-local}" \
  --region us-east-1 \
  --param="provisionerConfig=$config_file" \
  --param="allowLiteralSecrets=true" \
  --param="hostWorkQueueUrl=$HOST_WORK_QUEUE_URL" \
  --param="hostWorkDlqUrl=$HOST_WORK_DLQ_URL" \
  --param="lifecycleQueueUrl=$LIFECYCLE_QUEUE_URL" \
  --param="lifecycleDlqUrl=$LIFECYCLE_DLQ_URL" \
  "$@"
