# syntax=docker/dockerfile:1
# The gateway image (the default target): one image, two roles (docker-compose.yml picks the command):
#   npm run api       the HTTP API (stateless; scale horizontally)
#   npm run worker    the Temporal worker for video jobs (scale horizontally)
# The provider emulator, which the default catalog calls, is a development tool: its own target (`--target emulator`),
# never part of the gateway image.

# ---- build: dev dependencies, type-check + compile to dist/, then drop dev dependencies
FROM node:20-bookworm AS build
WORKDIR /app
COPY package.json package-lock.json ./
# Install scripts run only for the packages approved in package.json "allowScripts" (as npm 11 does locally).
RUN npm ci --ignore-scripts --no-audit --no-fund \
 && approved="$(node -p "Object.keys(require('./package.json').allowScripts || {}).filter((p) => { try { require.resolve(p + '/package.json'); return true } catch { return false } }).join(' ')")" \
 && if [ -n "$approved" ]; then npm rebuild $approved; fi
COPY . .
RUN npm run build && npm prune --omit=dev --ignore-scripts

# ---- emulator: the provider emulator alone (docker compose builds it for the default catalog)
FROM node:20-bookworm-slim AS emulator
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/package.json /app/package-lock.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist/emulator ./dist/emulator
COPY --from=build /app/dist/src/projectRoot.js ./dist/src/projectRoot.js
COPY --from=build /app/emulator/fixtures ./emulator/fixtures
USER node
EXPOSE 4010
CMD ["node", "--enable-source-maps", "dist/emulator/main.js"]

# ---- runtime (the default target): production dependencies and the gateway's compiled code only (no emulator,
# bench or tests), as an unprivileged user
FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/package.json /app/package-lock.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist/src ./dist/src
COPY --from=build /app/dist/workflows ./dist/workflows
COPY --from=build /app/dist/activities ./dist/activities
# Read from the source tree at run time: SQL migrations (src/db/migrations) and console assets.
COPY --from=build /app/src ./src
COPY --from=build /app/config ./config
USER node
EXPOSE 8080
# V8 memory settings, see docs/benchmarks.md: a 16 MB young-generation semi-space (half as many scavenges as 8 MB,
# each costing about the same: ~5 % CPU per request), and the old generation collected once it is 1.5 times its
# live size (V8's adaptive factor let it reach ~3 times under steady load: ~35 MB of garbage at the peak). Together:
# less CPU and ~35 MB less peak RSS than an 8 MB semi-space alone. Keep in step with `npm run api` in package.json.
CMD ["node", "--max-semi-space-size=16", "--heap-growing-percent=50", "--no-allocation-site-pretenuring", "--enable-source-maps", "dist/src/server.js"]
