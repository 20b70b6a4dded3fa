"""Checks what `sls deploy` created in the local AWS emulator (moto server), then, with --removed,
what `sls remove` left. Run by scripts/emulator/deploy.sh; reads AWS_ENDPOINT_URL like the SDKs do.

    check_stack.py <stage> <region>            after sls deploy
    check_stack.py <stage> <region> --removed  after sls remove

Prints one line per check and a closing "N passed, N failed" line; exits 1 on any failure.
The emulator does not create every resource type (docs/deploy.md, "Deploying to a local emulator"):
alarms, Lambda event invoke configs, the admission table's TTL, function architectures and layer
attachments are checked in the packaged template instead
(test/deploy/template.test.ts).
"""

import ast
import io
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from urllib.parse import unquote

import boto3

stage, region = sys.argv[1], sys.argv[2]
removed = "--removed" in sys.argv[3:]
prefix = f"choria-provisioner-{stage}"
results = []


def check(name, condition, detail=""):
    results.append(bool(condition))
    print(f"{'ok  ' if condition else 'FAIL'} {name}{'' if condition else f' ({detail})'}")


def policy_document(document):
    """AWS returns a URL-encoded JSON string; moto's CloudFormation stores the Python repr of the dict."""
    if not isinstance(document, str):
        return document
    text = unquote(document)
    try:
        return json.loads(text)
    except ValueError:
        return ast.literal_eval(text)


def client(service):
    return boto3.client(service, region_name=region)


cfn, dynamodb, sqs, lam, events, iam = (client(s) for s in ("cloudformation", "dynamodb", "sqs", "lambda", "events", "iam"))
tables = dynamodb.list_tables()["TableNames"]

if removed:
    stacks = [s for s in cfn.list_stacks()["StackSummaries"] if s["StackName"] == prefix and s["StackStatus"] != "DELETE_COMPLETE"]
    check("sls remove deleted the stack", not stacks, stacks)
    functions = [f["FunctionName"] for f in lam.list_functions()["Functions"] if f["FunctionName"].startswith(prefix)]
    check("sls remove deleted the functions", not functions, functions)
    queues = sqs.list_queues(QueueNamePrefix=prefix).get("QueueUrls", [])
    check("sls remove deleted the queues", not queues, queues)
    # DeletionPolicy Retain: the lease term must never go back.
    check("the lease and admission tables are retained", f"{prefix}-lease" in tables and f"{prefix}-admission" in tables, tables)
else:
    # --- tables
    lease = dynamodb.describe_table(TableName=f"{prefix}-lease")["Table"]
    check("lease table keyed by site", lease["KeySchema"] == [{"AttributeName": "site", "KeyType": "HASH"}], lease["KeySchema"])
    check("lease table on demand", lease.get("BillingModeSummary", {}).get("BillingMode") == "PAY_PER_REQUEST", lease.get("BillingModeSummary"))
    admission = dynamodb.describe_table(TableName=f"{prefix}-admission")["Table"]
    check(
        "admission table keyed by site + identity",
        admission["KeySchema"] == [{"AttributeName": "site", "KeyType": "HASH"}, {"AttributeName": "identity", "KeyType": "RANGE"}],
        admission["KeySchema"],
    )
    ledger_index = [index for index in admission.get("GlobalSecondaryIndexes", []) if index["IndexName"] == "ledger-by-day"]
    check(
        "admission table has the issuance ledger's index by day",
        len(ledger_index) == 1
        and ledger_index[0]["KeySchema"] == [{"AttributeName": "ledgerDay", "KeyType": "HASH"}, {"AttributeName": "issuedAt", "KeyType": "RANGE"}],
        admission.get("GlobalSecondaryIndexes"),
    )

    # --- queues
    def queue(name):
        url = sqs.get_queue_url(QueueName=f"{prefix}-{name}")["QueueUrl"]
        return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]

    for name, dlq, visibility, receives in (("host-work", "host-work-dlq", "1810", 10), ("lifecycle", "lifecycle-dlq", "180", 5)):
        attributes = queue(name)
        dead = queue(dlq)
        redrive = json.loads(attributes.get("RedrivePolicy", "{}"))
        check(f"{name} queue redrives to {dlq}", redrive.get("deadLetterTargetArn") == dead["QueueArn"], redrive)
        check(f"{name} queue gives up after {receives} receives", int(redrive.get("maxReceiveCount", 0)) == receives, redrive)
        check(f"{name} queue visibility {visibility} s", attributes["VisibilityTimeout"] == visibility, attributes["VisibilityTimeout"])
        check(f"{dlq} keeps messages 14 days", dead["MessageRetentionPeriod"] == "1209600", dead["MessageRetentionPeriod"])

    # --- functions, roles and event sources
    names = ["discover", "leaseKeeper", "lifecycle", "provision", "status", "reprovision", "release"]
    roles = {}
    for fn in names:
        config = lam.get_function(FunctionName=f"{prefix}-{fn}")["Configuration"]
        check(f"{fn} runs nodejs22.x", config["Runtime"] == "nodejs22.x", config["Runtime"])
        roles[fn] = config["Role"].rsplit("/", 1)[1]
    check("one role per function", len(set(roles.values())) == len(names), roles)

    def policies(fn):
        role = roles[fn]
        documents = {}
        for policy in iam.list_role_policies(RoleName=role)["PolicyNames"]:
            document = iam.get_role_policy(RoleName=role, PolicyName=policy)["PolicyDocument"]
            documents[policy] = policy_document(document)
        return documents

    def statements(document):
        return document["Statement"] if isinstance(document["Statement"], list) else [document["Statement"]]

    for fn in names:
        trust = iam.get_role(RoleName=roles[fn])["Role"]["AssumeRolePolicyDocument"]
        check(f"{fn} role is assumed by Lambda", "lambda.amazonaws.com" in json.dumps(trust), trust)
        secrets = policies(fn).get("read-config-secrets")
        check(f"{fn} role has its config-secrets policy", secrets is not None, list(policies(fn)))
        allowed = json.dumps([s for s in statements(secrets) if s["Effect"] == "Allow"]) if secrets else ""
        if fn in ("status", "release"):
            check(f"{fn} may read no secret", allowed == "[]" and any(s["Effect"] == "Deny" for s in statements(secrets)), allowed)
        else:
            check(f"{fn} may read the TLS key secret", "choria/provisioner/tls-key" in allowed, allowed)
            check(
                f"{fn} may read the token only if it provisions",
                ("parameter/choria/provisioner/token" in allowed) == (fn == "provision"),
                allowed,
            )

    mappings = lam.list_event_source_mappings()["EventSourceMappings"]
    for fn, queue_name, batch in (("provision", "host-work", 10), ("lifecycle", "lifecycle", 10)):
        arn = queue(queue_name)["QueueArn"]
        found = [m for m in mappings if m["EventSourceArn"] == arn]
        check(f"{fn} consumes the {queue_name} queue", len(found) == 1 and found[0]["FunctionArn"].endswith(f":{prefix}-{fn}"), found)
        if found:
            check(f"{fn} event source batch size {batch}", found[0].get("BatchSize") == batch, found[0].get("BatchSize"))
            check(
                f"{fn} event source reports partial batch failures",
                found[0].get("FunctionResponseTypes") == ["ReportBatchItemFailures"],
                found[0].get("FunctionResponseTypes"),
            )

    rules = events.list_rules()["Rules"]
    for fn, expression in (("discover", "rate(5 minutes)"), ("leaseKeeper", "rate(1 minute)")):
        targeted = [
            r for r in rules if any(t["Arn"].endswith(f":{prefix}-{fn}") for t in events.list_targets_by_rule(Rule=r["Name"])["Targets"])
        ]
        check(f"{fn} is scheduled at {expression}", [r.get("ScheduleExpression") for r in targeted] == [expression], targeted)
    # The ticks reach `lifecycle` through its queue only: no schedule (docs/lease.md).
    ticked = [r for r in rules if any(t["Arn"].endswith(f":{prefix}-lifecycle") for t in events.list_targets_by_rule(Rule=r["Name"])["Targets"])]
    check("lifecycle is not scheduled", ticked == [], ticked)

    # moto names the layer after its logical id rather than `name`; the description is ours.
    layers = [layer for layer in lam.list_layers()["Layers"] if "provisioning helper" in layer["LatestMatchingVersion"].get("Description", "")]
    check("the helper layer is published", len(layers) == 1, lam.list_layers()["Layers"])
    if layers:
        # Unpack the uploaded layer artifact as Lambda mounts it (/opt) and run the helper from there.
        s3 = client("s3")
        bucket = cfn.describe_stack_resource(StackName=prefix, LogicalResourceId="ServerlessDeploymentBucket")["StackResourceDetail"]
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket["PhysicalResourceId"]).get("Contents", []) if o["Key"].endswith("/helper.zip")]
        check("the layer artifact was uploaded", len(keys) >= 1, keys)
        with tempfile.TemporaryDirectory() as opt:
            body = s3.get_object(Bucket=bucket["PhysicalResourceId"], Key=sorted(keys)[-1])["Body"].read()
            archive = zipfile.ZipFile(io.BytesIO(body))
            info = archive.getinfo("bin/provision-helper")
            check("the layer keeps the helper executable", (info.external_attr >> 16) & 0o111, oct(info.external_attr >> 16))
            archive.extractall(opt)
            helper = os.path.join(opt, "bin/provision-helper")
            os.chmod(helper, (info.external_attr >> 16) & 0o777)
            run = subprocess.run([helper], input=b'{"identity":"node1.example.net"}', capture_output=True, check=False, timeout=10)
            reply = json.loads(run.stdout or b"{}")
            check("the layer's helper configures a node", reply.get("configuration", {}).get("identity") == "node1.example.net", run)

passed = sum(results)
print(f"{passed} passed, {len(results) - passed} failed")
sys.exit(0 if passed == len(results) else 1)
