// Built only without CUDA; devices/cuda/ provides the real gpu_count otherwise.
#include "devices/device.hpp"

namespace actorflow {

int gpu_count() { return 0; }

std::string gpu_absence_reason() {
  return "actorflow was built without CUDA (configure where the CUDA toolkit is found)";
}

} // namespace actorflow
