#!/usr/bin/env python3
"""What kubernetes-validate leaves out of a rendered kustomize build: custom
resources and the references between documents. Run by
scripts/deploy-check.sh with the venv that holds kubernetes-validate:

  deploy_manifest_check.py --kubernetes-version 1.31.0... --crd CRD.yaml... BUILD.yaml

1. Every document has a schema. A kind kubernetes-validate knows is left to
   it (deploy-check.sh runs it with --strict); a custom resource (the
   PodMonitor) is validated against the OpenAPI schema of its
   CustomResourceDefinition, strictly, as the API server does with field
   validation Strict: an object schema that lists its properties and does
   not declare x-kubernetes-preserve-unknown-fields admits no other field.
   Its metadata, which a CRD leaves open, is checked as a Kubernetes
   ObjectMeta by kubernetes-validate's strict schema. A document of a kind
   neither knows fails: none is left unchecked. Not checked: a CRD's CEL
   rules (x-kubernetes-validations) and OpenAPI formats.
2. References that no schema sees, each a silent failure on a cluster:
   selectors (StatefulSet, Service, PodDisruptionBudget, PodMonitor) match
   the pod template's labels; probe, Service and PodMonitor ports name a
   container port; ConfigMaps and Secrets referenced exist in the build, with
   the keys referenced. A build with no Secret at all (the base) expects its
   Secrets to be made out of band: their names and keys are listed instead.
"""

import argparse
import copy
import pathlib
import sys

import jsonschema
import kubernetes_validate
import kubernetes_validate.utils as kv
import yaml

# A bare `=` (an enum value in some CRDs) is YAML 1.1's `value` tag: a string.
yaml.SafeLoader.add_constructor(
    "tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node)
)


def strict(schema):
    """The schema with additionalProperties: false on every object schema
    that lists its properties and does not preserve unknown fields."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if (
                "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
            ):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


def crd_schemas(files):
    """(apiVersion, kind) -> strict schema, for every served version of
    every CRD in the files."""
    schemas = {}
    for path in map(pathlib.Path, files):
        for crd in yaml.safe_load_all(path.read_text()):
            if not crd or crd.get("kind") != "CustomResourceDefinition":
                continue
            group = crd["spec"]["group"]
            kind = crd["spec"]["names"]["kind"]
            for version in crd["spec"]["versions"]:
                if version.get("served"):
                    schema = version["schema"]["openAPIV3Schema"]
                    schemas[(f"{group}/{version['name']}", kind)] = strict(schema)
    return schemas


def has_builtin_schema(document, kubernetes_version):
    try:
        kubernetes_validate.validate(document, kubernetes_version, strict=True)
    except kv.SchemaNotFoundError:
        return False
    except kv.ValidationError:
        pass  # kubernetes-validate --strict reports it (deploy-check.sh)
    return True


def objectmeta_errors(metadata, kubernetes_version):
    """The metadata checked as an ObjectMeta, by way of an empty ConfigMap."""
    probe = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}
    try:
        kubernetes_validate.validate(probe, kubernetes_version, strict=True)
    except kv.ValidationError as error:
        path = ".".join(str(p) for p in error.absolute_path)
        return [f"{path}: {error.message}"]
    return []


def schema_errors(documents, schemas, kubernetes_versions):
    """Errors of the documents kubernetes-validate has no schema for (in the
    newest of the versions), their metadata checked by each version."""
    kubernetes_version = kubernetes_versions[-1]
    errors, checked = [], []
    for document in documents:
        api_version, kind = document.get("apiVersion"), document.get("kind")
        if has_builtin_schema(document, kubernetes_version):
            continue
        name = f"{kind}/{document['metadata'].get('name')} ({api_version})"
        schema = schemas.get((api_version, kind))
        if schema is None:
            errors.append(f"{name}: no schema, neither built in nor a given CRD")
            continue
        found = [
            f"{name} against its CRD: "
            f"{'.'.join(str(p) for p in error.absolute_path) or '(root)'}: {error.message}"
            for error in jsonschema.Draft7Validator(schema).iter_errors(document)
        ]
        found += [
            f"{name} against its CRD: {error} (Kubernetes {version})"
            for version in kubernetes_versions
            for error in objectmeta_errors(document.get("metadata", {}), version)
        ]
        errors += found
        if not found:
            checked.append(name)
    return errors, checked


def workloads(documents):
    """(name, pod template, selector) of every workload in the build."""
    kinds = {"StatefulSet", "Deployment", "DaemonSet"}
    return [
        (
            f"{d['kind']}/{d['metadata']['name']}",
            d["spec"]["template"],
            d["spec"]["selector"].get("matchLabels", {}),
        )
        for d in documents
        if d.get("kind") in kinds
    ]


def matches(match_labels, labels):
    return bool(match_labels) and all(labels.get(k) == v for k, v in match_labels.items())


def port_names(template):
    return {
        port.get("name")
        for container in template["spec"].get("containers", [])
        for port in container.get("ports", [])
    }


def reference_errors(documents):
    """Selectors, port names and config references the schemas cannot see."""
    errors = []
    by_kind = {}
    for document in documents:
        by_kind.setdefault(document["kind"], {})[document["metadata"]["name"]] = document
    templates = workloads(documents)
    # A build without Secrets leaves them all to be made out of band.
    external = None if "Secret" in by_kind else {}

    for name, template, selector in templates:
        if not matches(selector, template["metadata"].get("labels", {})):
            errors.append(f"{name}: its selector {selector} does not match its pod template's labels")
        spec = template["spec"]
        for container in spec.get("initContainers", []) + spec.get("containers", []):
            where = f"{name} container {container['name']}"
            for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                port = (container.get(probe) or {}).get("httpGet", {}).get("port")
                if isinstance(port, str) and port not in port_names(template):
                    errors.append(f"{where}: {probe} port {port!r} is no container port")
            for source in container.get("envFrom", []):
                for ref, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
                    if ref in source:
                        errors += missing(by_kind, kind, source[ref]["name"], None, where, external)
            for variable in container.get("env", []):
                value_from = variable.get("valueFrom", {})
                for ref, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
                    if ref in value_from:
                        key_ref = value_from[ref]
                        errors += missing(
                            by_kind, kind, key_ref["name"], key_ref["key"],
                            f"{where} env {variable['name']}", external,
                        )

    # What selects pods by label, and the ports it names.
    for kind, selector_of, ports_of in (
        ("Service", lambda s: s.get("selector", {}), lambda s: [p.get("targetPort") for p in s.get("ports", [])]),
        ("PodDisruptionBudget", lambda s: s["selector"].get("matchLabels", {}), lambda s: []),
        ("PodMonitor", lambda s: s["selector"].get("matchLabels", {}),
         lambda s: [e.get("port") for e in s.get("podMetricsEndpoints", [])]),
    ):
        for name, document in by_kind.get(kind, {}).items():
            selector = selector_of(document["spec"])
            chosen = [t for _, t, _ in templates if matches(selector, t["metadata"].get("labels", {}))]
            if not chosen:
                errors.append(f"{kind}/{name}: its selector {selector} matches no pod template")
            for port in ports_of(document["spec"]):
                if isinstance(port, str) and not any(port in port_names(t) for t in chosen):
                    errors.append(f"{kind}/{name}: port {port!r} is no port of the pods it selects")
    return errors, external


def missing(by_kind, kind, name, key, where, external):
    """Why a referenced ConfigMap or Secret (or its key) is not there;
    a Secret of a build without Secrets is noted in `external` instead."""
    if kind == "Secret" and external is not None:
        external.setdefault(name, set()).update([key] if key else [])
        return []
    document = by_kind.get(kind, {}).get(name)
    if document is None:
        return [f"{where}: {kind} {name!r} is not in the build"]
    keys = set(document.get("data", {})) | set(document.get("stringData", {}))
    if key is not None and key not in keys:
        return [f"{where}: {kind} {name!r} has no key {key!r}"]
    return []


def main():
    parser = argparse.ArgumentParser(
        description="Checks custom resources and references of a kustomize build."
    )
    parser.add_argument("--crd", action="append", required=True, help="a CRD's YAML file")
    parser.add_argument("--kubernetes-version", action="append", required=True)
    parser.add_argument("build", help="the output of kustomize build")
    args = parser.parse_args()

    documents = [d for d in yaml.safe_load_all(pathlib.Path(args.build).read_text()) if d]
    errors, checked = schema_errors(documents, crd_schemas(args.crd), args.kubernetes_version)
    try:
        found, external = reference_errors(documents)
    except (KeyError, TypeError, AttributeError) as error:
        # A document malformed enough for this (kubernetes-validate names it).
        found, external = [f"cannot follow the references of a malformed document: {error!r}"], None
    errors += found
    for name in checked:
        print(f"INFO {args.build}: {name} passed against its CRD's schema, strictly")
    for error in errors:
        print(f"ERROR {args.build}: {error}")
    for name, keys in sorted((external or {}).items()):
        print(f"INFO {args.build}: Secret {name!r} is to be made out of band, with keys {', '.join(sorted(keys))}")
    if not errors:
        print(f"INFO {args.build}: selectors, ports and config references resolve")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
