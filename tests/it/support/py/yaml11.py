"""Reads YAML the way kubectl, Helm, Argo CD and Flux do: YAML 1.1, as
go-yaml v2 resolves it (PyYAML's SafeLoader, plus y/Y/n/N as booleans,
which PyYAML leaves as strings and go-yaml does not).

usage: yaml11.py FILE...   (reads each file's documents)
Prints one JSON line per file: {"file": ..., "documents": [...]}. A value
JSON has no type for (a timestamp, a date) becomes
{"__yaml11__": TYPE, "value": TEXT}, so it can never equal a string.
"""

import json
import re
import sys

import yaml


class Yaml11Loader(yaml.SafeLoader):
    pass


Yaml11Loader.bool_values = dict(yaml.SafeLoader.bool_values, y=True, n=False)
Yaml11Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:y|Y|n|N)$"), list("yYnN")
)


def tagged(value):
    return {"__yaml11__": type(value).__name__, "value": str(value)}


for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        documents = [d for d in yaml.load_all(f, Loader=Yaml11Loader) if d is not None]
    print(json.dumps({"file": path, "documents": documents}, default=tagged))
