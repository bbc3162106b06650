# Source at the start of every command on a GPU machine with no network:
#   . tests/gpu/device_setup.sh
# Installs the wheels carried in .device_wheels/ (see tests/gpu/README.md) into
# /tmp/site, builds PyCUDA from its sdist there when no PyCUDA wheel was carried
# (about 85 s on 16 cores; the wheel lands in $OUT so that later calls carry it),
# installs compute-sanitizer from its PyPI wheel (nvidia-cuda-sanitizer-api)
# into /tmp/sanitizer and puts it first on PATH (the image's own, under
# /usr/local/cuda/bin, when that wheel was not carried), and prints the
# driver's, the device's and compute-sanitizer's versions.
export PYTHONUNBUFFERED=1
W=$PWD/.device_wheels
# The sanitizer's wheel goes apart: its nvidia/cu13/ must not sit on PYTHONPATH beside torch's.
site_wheels=(); sanitizer_wheels=()
for w in "$W"/*.whl; do
  case ${w##*/} in
    nvidia_cuda_sanitizer_api-*) sanitizer_wheels+=("$w") ;;
    *) site_wheels+=("$w") ;;
  esac
done
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "${site_wheels[@]}" || return 1
export PYTHONPATH=/tmp/site:$PWD
if [ ${#sanitizer_wheels[@]} -gt 0 ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/sanitizer \
      "${sanitizer_wheels[-1]}" || return 1
  chmod +x /tmp/sanitizer/nvidia/cu*/bin/compute-sanitizer
  export PATH=$(dirname /tmp/sanitizer/nvidia/cu*/bin/compute-sanitizer):$PATH
elif ! command -v compute-sanitizer >/dev/null && [ -x /usr/local/cuda/bin/compute-sanitizer ]; then
  export PATH=$PATH:/usr/local/cuda/bin
fi
if ! python3 -c "import pycuda.driver" 2>/dev/null; then
  t0=$(date +%s)
  mkdir -p /tmp/pcb && tar xzf $W/pycuda-*.tar.gz -C /tmp/pcb && cd /tmp/pcb/pycuda-*/ || return 1
  CUDA_ROOT=$(dirname $(dirname $(readlink -f $(which nvcc))))
  python3 configure.py --cuda-root=$CUDA_ROOT --no-cuda-enable-curand > /tmp/pcb/configure.log 2>&1
  python3 setup.py build_ext -j "$(nproc)" bdist_wheel -d "${OUT:-/tmp/pcb/dist}" > /tmp/pcb/build.log 2>&1 || { tail -50 /tmp/pcb/build.log; return 1; }
  cd - >/dev/null
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site "${OUT:-/tmp/pcb/dist}"/pycuda-*.whl || return 1
  echo "built PyCUDA in $(( $(date +%s) - t0 )) s: $(ls "${OUT:-/tmp/pcb/dist}")"
fi
echo "compute-sanitizer: $(command -v compute-sanitizer || echo 'NOT FOUND') $(compute-sanitizer --version 2>/dev/null | grep -i '^version')"
python3 -c "import pycuda.driver as d; d.init(); print('pycuda', d.get_version(), d.get_driver_version(), d.Device(0).name())"
