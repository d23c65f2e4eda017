#!/usr/bin/env bash
# The image's entrypoint (run under tini).
#
#   driver ARGS...    the Spark driver pod of a SparkApplication (Spark on Kubernetes
#                     starts it so): spark-submit in client mode inside the pod
#   executor          a Spark executor pod: the JVM executor backend, configured by the
#                     SPARK_* variables Spark on Kubernetes sets
#   anything else     the isrwatch command line: `isrwatch ARGS...` (the image's CMD: run)
#
# Spark's own images have an entrypoint with the same two commands; this one needs no
# writable /tmp or /etc/passwd, as the root filesystem is read-only.
set -euo pipefail

spark_classpath() {
    local parts=("${SPARK_CONF_DIR:-${SPARK_HOME}/conf}")
    if [[ -n "${HADOOP_CONF_DIR:-}" ]]; then parts+=("${HADOOP_CONF_DIR}"); fi
    if [[ -n "${SPARK_CLASSPATH:-}" ]]; then parts+=("${SPARK_CLASSPATH}"); fi
    parts+=("${SPARK_HOME}/jars/*")
    if [[ -n "${SPARK_EXTRA_CLASSPATH:-}" ]]; then parts+=("${SPARK_EXTRA_CLASSPATH}"); fi
    if [[ -n "${SPARK_DIST_CLASSPATH:-}" ]]; then parts+=("${SPARK_DIST_CLASSPATH}"); fi
    local IFS=:
    printf '%s' "${parts[*]}"
}

case "${1:-}" in
    driver)
        shift
        exec "${SPARK_HOME}/bin/spark-submit" \
            --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS}" \
            --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=${SPARK_DRIVER_BIND_ADDRESS}" \
            --deploy-mode client \
            "$@"
        ;;
    executor)
        shift
        # Spark passes extra JVM options as SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ... in order.
        java_opts=()
        while IFS= read -r name; do
            java_opts+=("${!name}")
        done < <(compgen -e | grep -E '^SPARK_JAVA_OPT_[0-9]+$' | sort -t_ -k4 -n || true)
        exec "${JAVA_HOME}/bin/java" \
            "${java_opts[@]}" \
            "-Xms${SPARK_EXECUTOR_MEMORY}" \
            "-Xmx${SPARK_EXECUTOR_MEMORY}" \
            -cp "$(spark_classpath)" \
            org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
            --driver-url "${SPARK_DRIVER_URL}" \
            --executor-id "${SPARK_EXECUTOR_ID}" \
            --cores "${SPARK_EXECUTOR_CORES}" \
            --app-id "${SPARK_APPLICATION_ID}" \
            --hostname "${SPARK_EXECUTOR_POD_IP}" \
            --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID}" \
            --podName "${SPARK_EXECUTOR_POD_NAME}"
        ;;
    *)
        exec isrwatch "$@"
        ;;
esac
