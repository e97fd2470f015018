# syntax=docker/dockerfile:1
# privpca container: multi-stage, non-root, data on a volume, `serve` as entrypoint.
# The build stage runs scripts/build.sh, the same script CI runs.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN PROFILE=release STAGE=/out scripts/build.sh

FROM debian:bookworm-slim
# /keys: where deploy/compose.yaml mounts the replicas' shared ledger signing key volume; a new
# named volume takes the ownership of the image's directory, so the service can create the key.
RUN useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin privpca \
    && mkdir -p /data /keys && chown privpca /data /keys
COPY --from=build /out/usr/local/bin/privpca /usr/local/bin/privpca
USER privpca
VOLUME ["/data"]
ENV PRIVPCA_BIND=0.0.0.0:8080 \
    PRIVPCA_DATABASE_URL=sqlite:///data/privpca.db \
    PRIVPCA_DATA_DIR=/data \
    PRIVPCA_LOG_FORMAT=json \
    PRIVPCA_HEALTHCHECK_ADDR=127.0.0.1:8080
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 CMD ["privpca", "healthcheck"]
ENTRYPOINT ["privpca"]
CMD ["serve"]
