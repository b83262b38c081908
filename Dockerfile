# syntax=docker/dockerfile:1
# Build: compile TypeScript with the dev dependencies.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# `npm install` rather than `npm ci`: see .ci/run.
RUN npm install --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# Run: production dependencies and the compiled output only, as a non-root user.
FROM node:24-bookworm-slim AS runtime-base
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm install --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY config ./config
USER node
# SIGTERM drains in-flight requests; allow shutdown.timeoutMs before a kill.
STOPSIGNAL SIGTERM

# The HTTP gateway (`docker build --target gateway .`): the client-server
# push-rule and pusher endpoints on 8090, health and metrics on 9465.
FROM runtime-base AS gateway
EXPOSE 8090 9465
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s \
  CMD ["node", "-e", "fetch('http://127.0.0.1:9465/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "dist/gateway-main.js"]

# The push gateway for development (`docker build --target push-gateway .`):
# answers the Matrix push gateway API on 8091 and prints one line per device
# notified; pushes nothing anywhere.
FROM runtime-base AS push-gateway
ENV LOCAL_PUSH_GATEWAY_HOST=0.0.0.0
EXPOSE 8091
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s \
  CMD ["node", "-e", "fetch('http://127.0.0.1:8091/health').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "dist/local-push-gateway-main.js"]

# The worker: the default target, last so that `docker build .` builds it.
FROM runtime-base AS worker
# Health and metrics: /healthz, /readyz, /metrics.
EXPOSE 9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s \
  CMD ["node", "-e", "fetch('http://127.0.0.1:9464/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# The V8 flags of `npm start` (see docs/operations.md, Memory).
CMD ["node", "--max-semi-space-size=8", "dist/main.js"]
