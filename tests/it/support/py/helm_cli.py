"""The `helm` command line, as far as the docs use it, on helm-python-sdk
(Helm's own Go SDK): `install` and `upgrade` with --namespace,
--create-namespace, --set (parsed by Helm's strvals parser), --values,
--wait and --timeout, against the cluster of $KUBECONFIG. A test puts it
on the PATH as `helm`, so the docs' commands run as a user pastes them.

usage: helm_cli.py install|upgrade RELEASE CHART [flags]
"""

import argparse
import json
import os
import sys

import helm_python as helm


def merge(into, extra):
    """Helm's merge of --set values: nested maps merge, the rest replaces."""
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value
    return into


def duration_seconds(text):
    """Helm's --timeout (a Go duration such as 5m0s or 300s) in seconds."""
    units = {"h": 3600, "m": 60, "s": 1}
    total, number = 0, ""
    for ch in text:
        if ch.isdigit() or ch == ".":
            number += ch
        elif ch in units and number:
            total += float(number) * units[ch]
            number = ""
        else:
            sys.exit(f"Error: invalid duration {text!r}")
    return int(total + (float(number) if number else 0))


parser = argparse.ArgumentParser(prog="helm")
parser.add_argument("action", choices=["install", "upgrade"])
parser.add_argument("release")
parser.add_argument("chart")
parser.add_argument("-n", "--namespace", default="default")
parser.add_argument("--create-namespace", action="store_true")
parser.add_argument("--set", action="append", default=[])
parser.add_argument("-f", "--values", action="append", default=[])
parser.add_argument("--wait", action="store_true")
parser.add_argument("--timeout", default="5m0s")
args = parser.parse_args()

values = {}
for path in args.values:
    with open(path, encoding="utf-8") as f:
        merge(values, helm.values_from_yaml(f.read()) or {})
for expression in args.set:
    merge(values, helm.parse_set_string(expression))

config = helm.Config(kubeconfig_path=os.environ.get("KUBECONFIG"), namespace=args.namespace)
timeout = duration_seconds(args.timeout)
wait = "watcher" if args.wait else None
try:
    if args.action == "install":
        release = config.install(
            args.chart,
            args.release,
            values,
            namespace=args.namespace,
            create_namespace=args.create_namespace,
            timeout=timeout,
            wait=wait,
        )
    else:
        release = config.upgrade(
            args.chart,
            args.release,
            values,
            namespace=args.namespace,
            timeout=timeout,
            wait=wait,
        )
except helm.HelmError as error:
    sys.exit(f"Error: {error}")
print(f"NAME: {args.release}")
print(f"NAMESPACE: {args.namespace}")
print(f"STATUS: {release['status']}")
print(json.dumps({"status": release["status"]}), file=sys.stderr)
