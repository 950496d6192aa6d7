# The image the Helm chart runs, for the operator and its workers alike:
#   docker build -t ghcr.io/mssql-cdc/mssql-cdc:0.1.0 .
# A static-enough release binary on distroless (glibc, CA certificates, no
# shell), running as the `nonroot` user (65532) the chart's security
# contexts expect.
FROM docker.io/library/rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin mssql-cdc \
    && cp target/release/mssql-cdc /usr/local/bin/mssql-cdc

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /usr/local/bin/mssql-cdc /usr/local/bin/mssql-cdc
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["mssql-cdc"]
