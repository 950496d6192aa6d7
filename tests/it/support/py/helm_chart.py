"""Lints, renders or installs a chart through helm-python-sdk (Helm v4 SDK).

usage: helm_chart.py lint CHART
       helm_chart.py render CHART RELEASE NAMESPACE VALUES_JSON
       helm_chart.py install KUBECONFIG CHART RELEASE NAMESPACE VALUES_JSON
       helm_chart.py upgrade KUBECONFIG CHART RELEASE NAMESPACE VALUES_JSON
       helm_chart.py uninstall KUBECONFIG RELEASE NAMESPACE
Prints one JSON document on the last line; exits non-zero on failure.
"""

import json
import sys

import helm_python as helm

action = sys.argv[1]
if action == "lint":
    report = helm.lint(sys.argv[2])
    print(json.dumps({"errors": report["errors"], "messages": report["messages"]}, default=str))
    sys.exit(1 if report["errors"] else 0)
elif action == "render":
    chart, release, namespace, values = sys.argv[2:6]
    loaded = helm.Chart.load(chart)
    files = loaded.render(json.loads(values), name=release, namespace=namespace, is_install=True)
    print(json.dumps(files))
elif action == "install":
    kubeconfig, chart, release, namespace, values = sys.argv[2:7]
    config = helm.Config(kubeconfig_path=kubeconfig, namespace=namespace)
    rel = config.install(chart, release, json.loads(values), timeout=60)
    print(json.dumps({"status": rel["status"], "releases": [r["name"] for r in config.list()]}))
elif action == "upgrade":
    kubeconfig, chart, release, namespace, values = sys.argv[2:7]
    config = helm.Config(kubeconfig_path=kubeconfig, namespace=namespace)
    rel = config.upgrade(chart, release, json.loads(values), timeout=60)
    print(json.dumps({"status": rel["status"], "version": rel.get("version")}))
elif action == "uninstall":
    kubeconfig, release, namespace = sys.argv[2:5]
    config = helm.Config(kubeconfig_path=kubeconfig, namespace=namespace)
    config.uninstall(release, timeout=60)
    print(json.dumps({"uninstalled": release}))
else:
    sys.exit(f"unknown action {action}")
