#!/usr/bin/env bash
# Certificates for the default, secure layout (deploy/README.md, "TLS"): a private CA, Quotient's
# serving certificate, kube-scheduler's client certificate and one for people (curl, Prometheus),
# then the two Secrets deploy/quotient.yaml and deploy/scheduler.yaml mount, and the CA as the
# caBundle of the conversion webhook in Quotient's own CRDs (deploy/crds.yaml; never Kueue's).
#
#   deploy/certs.sh [--dir DIR] [--days N] [--no-apply]
#
# DIR (default ./quotient-certs) keeps the files: ca.key stays with you, admin.crt/admin.key are
# what `curl --cacert ca.crt --cert admin.crt --key admin.key` needs. --no-apply only writes the
# files. Run it again (a new CA) to rotate; the Secrets are replaced, then restart both Deployments.
set -euo pipefail

dir=./quotient-certs
days=365
apply=1
namespace=quotient-system
service=quotient
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --days) days=$2; shift 2 ;;
    --no-apply) apply=0; shift ;;
    *) echo "usage: $0 [--dir DIR] [--days N] [--no-apply]" >&2; exit 2 ;;
  esac
done
command -v openssl >/dev/null || { echo "$0: needs the openssl command" >&2; exit 2; }
mkdir -p "$dir"
cd "$dir"
umask 077

issue() {  # name subject extensions
  printf '%b' "$3" > "$1.ext"
  openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -subj "$2" -out "$1.csr" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days "$days" -sha256 \
    -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days "$days" -sha256 \
  -subj "/CN=quotient-ca" -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
leaf="basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
# clientAuth too: the exec probes (quotient-healthcheck) present the serving certificate.
issue server "/CN=$service.$namespace.svc" "${leaf}extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=\
DNS:$service.$namespace.svc,DNS:$service.$namespace.svc.cluster.local,DNS:localhost,IP:127.0.0.1\n"
issue scheduler "/CN=quotient-scheduler" "${leaf}extendedKeyUsage=clientAuth\n"
issue admin "/CN=quotient-admin" "${leaf}extendedKeyUsage=clientAuth\n"
echo "certificates in $dir: ca.crt, server.*, scheduler.*, admin.* (valid $days days)"

if [ "$apply" = 1 ]; then
  secret() {  # name cert key
    kubectl -n "$namespace" create secret generic "$1" --from-file=tls.crt="$2.crt" \
      --from-file=tls.key="$2.key" --from-file=ca.crt=ca.crt --dry-run=client -o yaml | kubectl apply -f -
  }
  secret quotient-tls server
  secret quotient-scheduler-tls scheduler
fi

# kube-apiserver verifies the conversion webhook's certificate against the CRDs' caBundle. Only
# CRDs labelled as Quotient's (deploy/crds.yaml) with strategy Webhook: Kueue's own CRDs name
# Kueue's webhook and keep Kueue's CA.
bundle=$(base64 < ca.crt | tr -d '\n')
patch="{\"spec\":{\"conversion\":{\"webhook\":{\"clientConfig\":{\"caBundle\":\"$bundle\"}}}}}"
webhook_crds='{range .items[?(@.spec.conversion.strategy=="Webhook")]}{.metadata.name}{"\n"}{end}'
crds=""
[ "$apply" = 0 ] || crds=$(kubectl get crd -l app.kubernetes.io/name=quotient -o jsonpath="$webhook_crds")
for crd in $crds; do
  kubectl patch crd "$crd" --type merge -p "$patch"
done
if [ -z "$crds" ]; then
  echo "no CRDs of deploy/crds.yaml patched; once they are applied, set their caBundle:"
  echo "  for crd in \$(kubectl get crd -l app.kubernetes.io/name=quotient -o jsonpath='$webhook_crds'); do"
  echo "    kubectl patch crd \$crd --type merge -p '$patch'; done"
fi
