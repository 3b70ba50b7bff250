#!/usr/bin/env bash
# Installs the SQS- and S3-compatible servers the fleet tests and benches run against (safe to
# run again; what is installed is skipped), into /var/cache/ct-setup/servers (CT_SERVERS_DIR):
#   elasticmq/elasticmq.cp   ElasticMQ's class path (Maven Central org.elasticmq:elasticmq-server_2.13,
#                            run with Java 17+: `java -cp "$(cat elasticmq.cp)" org.elasticmq.server.Main`)
#   versitygw                the versitygw S3 gateway (Go module github.com/versity/versitygw), static
# Needs java and mvn (ElasticMQ) and go (versitygw) on PATH; Debian: openjdk-17-jre-headless maven golang.
set -euo pipefail

ELASTICMQ_VERSION=1.7.1
VERSITYGW_VERSION=latest
DIR="${CT_SERVERS_DIR:-/var/cache/ct-setup/servers}"

say() { echo "setup-queue-store: $*"; }
die() { echo "setup-queue-store: ERROR: $*" >&2; exit 1; }

mkdir -p "$DIR/elasticmq"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# ---------------------------------------------------------------- ElasticMQ
cp_file="$DIR/elasticmq/elasticmq.cp"
if [ -s "$cp_file" ] && [ "$(cat "$DIR/elasticmq/version" 2>/dev/null)" = "$ELASTICMQ_VERSION" ] &&
  tr ':' '\n' <"$cp_file" | while read -r jar; do [ -f "$jar" ] || exit 1; done; then
  say "ElasticMQ $ELASTICMQ_VERSION present"
else
  command -v java >/dev/null || die "java not found (apt-get install openjdk-17-jre-headless)"
  command -v mvn >/dev/null || die "mvn not found (apt-get install maven)"
  say "fetching ElasticMQ $ELASTICMQ_VERSION (Maven Central)"
  cat >"$WORK/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>ct.setup</groupId><artifactId>elasticmq-classpath</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.elasticmq</groupId><artifactId>elasticmq-server_2.13</artifactId><version>$ELASTICMQ_VERSION</version></dependency>
  </dependencies>
</project>
POM
  (cd "$WORK" && mvn -q dependency:build-classpath -Dmdep.outputFile="$WORK/cp" >"$WORK/mvn.log" 2>&1) || { tail -20 "$WORK/mvn.log" >&2; die "mvn could not fetch ElasticMQ"; }
  mv "$WORK/cp" "$cp_file"
  echo "$ELASTICMQ_VERSION" >"$DIR/elasticmq/version"
fi

# ---------------------------------------------------------------- versitygw
if [ -x "$DIR/versitygw" ] && "$DIR/versitygw" --version >/dev/null 2>&1; then
  say "versitygw present"
else
  command -v go >/dev/null || die "go not found (apt-get install golang, or Go from go.dev)"
  say "building versitygw (go install, a few minutes the first time)"
  GOBIN="$WORK/bin" go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION" >"$WORK/go.log" 2>&1 ||
    { grep -v '^go: downloading ' "$WORK/go.log" | tail -20 >&2; die "go install versitygw failed"; }
  mv "$WORK/bin/versitygw" "$DIR/versitygw"
fi
say "done ($DIR)"
