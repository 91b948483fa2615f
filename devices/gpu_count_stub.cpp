// Built only without CUDA; devices/cuda/ provides the real gpu_count otherwise.
#include "devices/device.hpp"

namespace actorflow {

int gpu_count() { return 0; }

} // namespace actorflow
