"""Checks that openapi-python-client generated a function for every operation of the contract.

Usage: generated_endpoints.py <openapi.json> <generated package dir>
Each operation must appear as api/<first tag>/<operationId>.py with a `sync_detailed` function.
"""

import json
import pathlib
import sys

document = json.loads(pathlib.Path(sys.argv[1]).read_text())
package = pathlib.Path(sys.argv[2])
missing = []
count = 0
for path, item in document["paths"].items():
    for method, operation in item.items():
        count += 1
        module = package / "api" / operation["tags"][0] / f"{operation['operationId']}.py"
        if not module.exists() or "def sync_detailed(" not in module.read_text():
            missing.append(f"{method.upper()} {path} ({module.relative_to(package)})")
if missing:
    sys.exit("not generated:\n  " + "\n  ".join(missing))
print(f"all {count} operations generated")
