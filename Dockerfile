# One image for every process of the service; the command picks api, worker, migrate or admin.
FROM node:22-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
# Fixes to dependencies, applied by npm's postinstall (patch-package).
COPY patches ./patches
# ONNX Runtime's CPU build is bundled; its CUDA libraries (fetched from NuGet by its install
# script, which this image's npm 10 runs: it does not read package.json's allowScripts) are not.
RUN ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund
COPY . .
RUN npm run build && npm prune --omit=dev --ignore-scripts

FROM node:22-bookworm-slim
# Workers read NDPI through libvips and OpenSlide (compute/slide/normalize.ts).
RUN apt-get update \
  && apt-get install -y --no-install-recommends libvips-tools \
  && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/db/migrations ./db/migrations
# The bundled model (models/registry.ts finds it beside dist/models or in models/).
COPY --from=build /app/models/baseline-v0.7.onnx ./models/
# The plane writers' WebAssembly kernel (compute/prediction/plane-kernel.ts finds it there).
COPY --from=build /app/compute/prediction/assembly/plane.wasm ./compute/prediction/assembly/
COPY package.json ./
USER node
EXPOSE 8080
CMD ["node", "dist/cli/api.js"]
