# The front door: every target first installs the Debian packages it needs when missing, then
# configures and builds a Release build in build/.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

BUILD_PACKAGES := cmake ninja-build g++ pkg-config ccache libcaf-dev libcapnp-dev capnproto zlib1g-dev \
  libspdlog-dev libssl-dev openssl clang libclang-rt-dev catch2 libeigen3-dev libopenblas-dev libdnnl-dev nlohmann-json3-dev graphviz iproute2 python3-yaml \
  libcpp-httplib-dev prometheus libprotobuf-dev protobuf-compiler python3-protobuf python3-crc32c \
  pybind11-dev python3-dev python3-numpy python3-pytest
DATA_PACKAGES := dataset-fashion-mnist dict-gcide wordnet-base
BENCH_PACKAGES := python3-torch

.PHONY: all deps deps-bench build test demo bench install clean gpu-bundle gpu-check cluster-certs fuzz

all: build

# Installs only what is missing; apt-get update runs once, only when something is.
define install_missing
	@missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

deps:
	$(call install_missing,$(BUILD_PACKAGES) $(DATA_PACKAGES))

deps-bench: deps
	$(call install_missing,$(BENCH_PACKAGES))

$(BUILD_DIR)/build.ninja: CMakeLists.txt
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The suite, guarded: it fails when fewer tests exist than tests/expected_test_count records,
# or when any test but the GPU's did not run (tests/run_suite.sh).
test: build
	bash tests/run_suite.sh $(BUILD_DIR) $(JOBS)

demo: build
	$(BUILD_DIR)/apps/actorflow-train --model mlp --output-dir $(BUILD_DIR)/demo-output --graph-out $(BUILD_DIR)/demo-output/graph.svg

bench: deps-bench build
	bench/run_all.sh $(BUILD_DIR)/bench

# Builds only what is installed (the libraries, the apps and the Python package: the target
# actorflow_installed), not the tests and benchmarks, in the same build dir as `build`.
install: deps $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS) --target actorflow_installed
	cmake --install $(BUILD_DIR) --prefix $(or $(PREFIX),/usr/local)

clean:
	rm -rf $(BUILD_DIR)

# Every fuzzer for FUZZ_SECONDS (default 600) each, one after another; what they find beyond the
# corpus goes to $(BUILD_DIR)/fuzz-found/NAME (merge interesting inputs into tests/fuzz/corpus).
FUZZ_SECONDS ?= 600
fuzz: build
	for f in tensor_header bulk_frame graph_loader checkpoint_loader; do \
	  tests/fuzz/run.sh $(BUILD_DIR)/fuzz/fuzz_$$f tests/fuzz/corpus/$$f $(FUZZ_SECONDS) \
	    $(BUILD_DIR)/fuzz-found/$$f || exit 1; \
	done

# A cluster CA and a certificate per member for mutual TLS (README, "Securing a cluster"):
#   make cluster-certs CERT_DIR=certs CERT_NAMES="ps0 worker0 worker1 client"
CERT_DIR ?= certs
CERT_NAMES ?= ps0 worker0 worker1 client
cluster-certs:
	$(call install_missing,openssl)
	deploy/tls/make-cluster-certs.sh $(CERT_DIR) $(CERT_NAMES)

# The GPU check, in two halves (README, "GPUs"): `make gpu-bundle` here builds the CUDA code
# and packs the GPU programs with the libraries a GPU machine lacks into gpu-bundle/; `make
# gpu-check OUT=dir` there runs the GPU kernel tests, training and benchmarks from it.
GPU_BUILD_DIR ?= build-gpu
gpu-bundle: deps
	cmake -S . -B $(GPU_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release -DACTORFLOW_WITH_CUDA=ON $(CMAKE_FLAGS)
	cmake --build $(GPU_BUILD_DIR) -j $(JOBS) --target devices_tests actorflow-train bench_gpu
	deploy/gpu/bundle.sh $(GPU_BUILD_DIR) gpu-bundle

gpu-check:
	deploy/gpu/check.sh gpu-bundle $(or $(OUT),gpu-check-output)
