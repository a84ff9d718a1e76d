# One image for every service of docker-compose.yml: Airflow (api-server, scheduler, dag-processor, triggerer)
# and the Spark master and workers, so Spark's executors run the same airflow-lake code and pyarrow as the
# Airflow tasks that submit to them. Python 3.11 + Java 17 (a JDK: javac builds our JVM code, airflow_lake/jvm), the
# pins of constraints.txt.
FROM python:3.11-slim-bookworm

RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jdk-headless procps curl tini \
    && rm -rf /var/lib/apt/lists/*

ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    AIRFLOW_HOME=/opt/airflow \
    PYSPARK_PYTHON=/usr/local/bin/python \
    SPARK_HOME=/usr/local/lib/python3.11/site-packages/pyspark \
    PATH=/usr/local/lib/python3.11/site-packages/pyspark/bin:$PATH

WORKDIR /opt/airflow-lake
COPY pyproject.toml constraints.txt README.md ./
COPY airflow_lake ./airflow_lake
RUN pip install --no-cache-dir uv==0.13.8 \
    && uv pip install --system --no-cache --compile-bytecode -c constraints.txt . psycopg2-binary==2.9.13 \
    && python -c "import glob, os, pyspark; assert glob.glob(os.path.join(os.path.dirname(pyspark.__file__), 'jars', f'spark-core_*'))" \
    && python -m airflow_lake.jvm

COPY dags /opt/airflow/dags
COPY plugins /opt/airflow/plugins
WORKDIR /opt/airflow
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["airflow", "version"]
