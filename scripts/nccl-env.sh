# shellcheck shell=bash disable=SC2034
# Sourced by the multi-GPU scripts (gpu-tp.sh, gpu-scale.sh, gpu-tp8.sh): finds NCCL. nccl.h
# from the CUDA toolkit when it has one, else from the PyTorch venv's nvidia/nccl wheel
# (include/ and lib/), else from .nccl-include beside the checkout's root (copied there by
# whoever sends the tree: cp /usr/local/cuda/include/nccl.h .nccl-include/). The library is
# opened at run time: TUNABLEOP_NCCL_LIBRARY points at the wheel's libnccl.so.2. Sets nccl_inc
# and nccl_lib_dir (empty when not found) and nccl_cmake (the configure flags). Expects ROOT.
nccl_inc="" nccl_lib_dir=""
if [ -f /usr/local/cuda/include/nccl.h ]; then
  nccl_inc=/usr/local/cuda/include
fi
for d in $(python3 -c 'import nvidia, sys; print(" ".join(nvidia.__path__))' 2>/dev/null) \
  /opt/torch/.venv/lib/python3*/site-packages/nvidia; do
  if [ -e "$d/nccl/lib/libnccl.so.2" ]; then
    nccl_lib_dir="$d/nccl/lib"
    [ -z "$nccl_inc" ] && [ -f "$d/nccl/include/nccl.h" ] && nccl_inc="$d/nccl/include"
    break
  fi
done
[ -z "$nccl_inc" ] && [ -f "$ROOT/.nccl-include/nccl.h" ] && nccl_inc="$ROOT/.nccl-include"
if [ -n "$nccl_lib_dir" ]; then
  export TUNABLEOP_NCCL_LIBRARY="$nccl_lib_dir/libnccl.so.2"
fi
nccl_cmake=(${nccl_inc:+-DTUNABLEOP_NCCL_INCLUDE_DIR=$nccl_inc} ${nccl_lib_dir:+-DTUNABLEOP_NCCL_LIBRARY_DIR=$nccl_lib_dir})
