#pragma once
/// GPU options, apart so that the session API can name them without the device headers.

namespace actorflow {

/// TensorFlow's GPUOptions: how much of each card's memory a process takes. The test device
/// honours the memory options too.
struct gpu_options {
  /// Share of each card's memory the process may use; 0 (the default) means all of it. Two
  /// processes at 0.4 share a card.
  double per_process_gpu_memory_fraction = 0;
  /// Reserve memory as tensors need it (and keep it) instead of all of it at the start.
  bool allow_growth = false;
  /// TensorFlow's device_count["GPU"]: at most this many GPU devices, the first ones CUDA
  /// shows; 0 makes none and asks the driver nothing. -1: every GPU.
  int device_count = -1;
};

} // namespace actorflow
