#!/usr/bin/env bash
# Fetch the peers' Spark jars (Delta Lake, Iceberg, Hudi) from Maven Central into a git-ignored cache for
# benchmarks/bench_peers.py. Idempotent: a jar set already complete is not fetched again. Never commit the jars.
#
#   benchmarks/peers_setup.sh            # -> benchmarks/.peers/jars/{delta,iceberg,hudi}/*.jar, .peers/status.txt,
#                                        #    .peers/venv-spark4.1.3 (Iceberg), .peers/venv-spark3.5.9 (Hudi)
#
# Why a pom + copy-dependencies: delta-spark pulls delta-storage and the delta-kernel jars (and their
# dependencies); Maven resolves them as Spark's --packages would, and the jars Spark itself ships (same artifact
# name in pyspark/jars) are dropped, so the JVM has one copy of scala-library, jackson, parquet...
set -euo pipefail

# -- pinned versions (checked against repo1.maven.org on 2026-11-29) ------------------------------------------
DELTA="io.delta:delta-spark_4.2_2.13:4.4.0"                      # built for Spark 4.2 (ours)
ICEBERG="org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0" # no 4.2 runtime exists; built for Spark 4.1
# Hudi: no Spark 4 bundle is on Maven Central (hudi-spark4.0-bundle_2.13 / hudi-spark4-bundle_2.13: 404 for 1.1.0,
# 1.1.1, 1.2.0), so Hudi runs on Spark 3.5 with its newest 3.5 bundle. The _2.12 one: pip's pyspark 3.5 ships
# Scala 2.12 jars (hudi-spark3.5-bundle_2.13 stops at 1.1.1). A bundle is a shaded jar meant for --jars as it is:
# fetched without its dependencies (its pom lists none it needs at run time beside Spark).
HUDI="${HUDI:-org.apache.hudi:hudi-spark3.5-bundle_2.12:1.2.0}"
# ... and a venv with this pyspark for it: only plain Spark and Hudi run there (our package needs pyspark >= 4.1);
# the benchmark's Spark 3.5 share (benchmarks/peers_spark35.py) imports no airflow_lake.
PYSPARK_35="3.5.9"
# Iceberg's runtime for Spark 4.1 does not load on Spark 4.2 (IncompatibleClassChangeError: SparkView implements
# Spark 4.1's View interface, a class in 4.2), so its part runs in a venv with this pyspark (both packages: one
# version), ours and plain Spark beside it on the same Spark for the ratios.
PYSPARK_41="4.1.3"

HERE="$(cd "$(dirname "$0")" && pwd)"
CACHE="${PEERS_CACHE:-$HERE/.peers}"
PYTHON="${PYTHON:-$HERE/../.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=/work/main/.venv/bin/python
SPARK_JARS="$("$PYTHON" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
mkdir -p "$CACHE/jars"
STATUS="$CACHE/status.txt"
: > "$STATUS.new"

fetch() {  # fetch NAME GROUP:ARTIFACT:VERSION [transitive: yes|no]
    local name="$1" coord="$2" transitive="${3:-yes}" dir="$CACHE/jars/$1"
    if [ -f "$dir/.complete" ] && [ "$(cat "$dir/.complete")" = "$coord" ]; then
        echo "$name ok $coord" | tee -a "$STATUS.new"; return 0
    fi
    rm -rf "$dir" "$CACHE/pom-$name"; mkdir -p "$dir" "$CACHE/pom-$name"
    IFS=: read -r group artifact version <<<"$coord"
    cat > "$CACHE/pom-$name/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.peers</groupId><artifactId>peers-$name</artifactId><version>1</version>
  <dependencies><dependency>
    <groupId>$group</groupId><artifactId>$artifact</artifactId><version>$version</version>
  </dependency></dependencies>
</project>
POM
    local args=(-B -q -U -f "$CACHE/pom-$name/pom.xml" dependency:copy-dependencies -DoutputDirectory="$dir"
                -DincludeScope=runtime)
    [ "$transitive" = no ] && args+=(-DexcludeTransitive=true)
    if ! mvn "${args[@]}" > "$CACHE/pom-$name/mvn.log" 2>&1; then
        echo "$name MISSING $coord: $(grep -m1 -oE "Could not find artifact [^ ]+|[^ ]+ was not found in [^ ]+" \
              "$CACHE/pom-$name/mvn.log" || grep -m1 ERROR "$CACHE/pom-$name/mvn.log")" | tee -a "$STATUS.new"
        rm -rf "$dir"; return 0
    fi
    # drop what Spark already ships (same artifact, any version): one copy per class on the classpath
    for jar in "$dir"/*.jar; do
        base="$(basename "$jar" .jar)"; stem="${base%-*}"
        if compgen -G "$SPARK_JARS/$stem-[0-9]*.jar" > /dev/null; then rm "$jar"; fi
    done
    echo "$coord" > "$dir/.complete"
    echo "$name ok $coord ($(ls "$dir" | wc -l) jars)" | tee -a "$STATUS.new"
}

fetch delta "$DELTA"
fetch iceberg "$ICEBERG" no
fetch hudi "$HUDI" no

# -- the pyspark 4.1 venv (for Iceberg): this repo (editable) with the repo's pins, pyspark's two packages at 4.1 --
VENV="$CACHE/venv-spark$PYSPARK_41"
UV="${UV:-$(command -v uv || echo "$(dirname "$PYTHON")/uv")}"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import pyspark, sys; sys.exit(pyspark.__version__ != '$PYSPARK_41')" 2>/dev/null; then
    echo "venv ok $VENV (pyspark $PYSPARK_41)" | tee -a "$STATUS.new"
else
    rm -rf "$VENV"
    "$UV" venv -q --python "$("$PYTHON" -c 'import sys; print(sys.executable)')" "$VENV"
    grep -v -E '^(pyspark|pyspark-client)==' "$HERE/../constraints.txt" > "$CACHE/constraints-spark$PYSPARK_41.txt"
    VIRTUAL_ENV="$VENV" "$UV" pip install -q -c "$CACHE/constraints-spark$PYSPARK_41.txt" -e "$HERE/.." \
        "pyspark==$PYSPARK_41" "pyspark-client==$PYSPARK_41"
    echo "venv ok $VENV (pyspark $PYSPARK_41)" | tee -a "$STATUS.new"
fi
# -- the pyspark 3.5 venv (for Hudi): no airflow_lake (it needs pyspark >= 4.1), only what peers_spark35.py imports,
# at the repo's pins where they fit (py4j is pyspark's own pin) --
VENV35="$CACHE/venv-spark$PYSPARK_35"
if [ -x "$VENV35/bin/python" ] && "$VENV35/bin/python" -c "import pyspark, sys; sys.exit(pyspark.__version__ != '$PYSPARK_35')" 2>/dev/null; then
    echo "venv35 ok $VENV35 (pyspark $PYSPARK_35)" | tee -a "$STATUS.new"
else
    rm -rf "$VENV35"
    "$UV" venv -q --python "$("$PYTHON" -c 'import sys; print(sys.executable)')" "$VENV35"
    grep -E '^(numpy|pyarrow)==' "$HERE/../constraints.txt" > "$CACHE/constraints-spark$PYSPARK_35.txt"
    VIRTUAL_ENV="$VENV35" "$UV" pip install -q -c "$CACHE/constraints-spark$PYSPARK_35.txt" \
        "pyspark==$PYSPARK_35" numpy pyarrow
    echo "venv35 ok $VENV35 (pyspark $PYSPARK_35)" | tee -a "$STATUS.new"
fi
mv "$STATUS.new" "$STATUS"
