# Sourced by the GPU scripts (gpu-attention.sh, gpu-attention2.sh): finds cuDNN 9 in the PyTorch
# venv's nvidia/cudnn wheel. Sets cudnn_inc (headers: the wheel's, else .cudnn-include beside the
# checkout's root, copied there by whoever sends the tree; empty when neither) and exports
# TUNABLEOP_CUDNN_LIBRARY and LD_LIBRARY_PATH for the library. Expects ROOT.
cudnn_dir=$(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null || true)
cudnn_inc=""
if [ -n "$cudnn_dir" ] && [ -f "$cudnn_dir/include/cudnn_graph.h" ]; then
  cudnn_inc="$cudnn_dir/include"
elif [ -f "$ROOT/.cudnn-include/cudnn_graph.h" ]; then
  cudnn_inc="$ROOT/.cudnn-include"
fi
if [ -n "$cudnn_dir" ] && [ -e "$cudnn_dir/lib/libcudnn.so.9" ]; then
  export TUNABLEOP_CUDNN_LIBRARY="$cudnn_dir/lib/libcudnn.so.9"
  cu_lib=$(python3 -c 'import nvidia.cu13 as m; print(list(m.__path__)[0])' 2>/dev/null || true)
  export LD_LIBRARY_PATH="$cudnn_dir/lib${cu_lib:+:$cu_lib/lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
