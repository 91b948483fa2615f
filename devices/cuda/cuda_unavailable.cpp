// Builds without CUDA: make_cuda_device exists (tests and embedders may ask for a GPU device in
// any build) and says why there is none.
#include "devices/cuda/cuda_device.hpp"

#include "devices/device_factory.hpp"

namespace actorflow {

result<std::unique_ptr<device>> make_cuda_device(device_name name, int, std::shared_ptr<thread_pool>,
                                                 gpu_options) {
  return make_error(errc::unimplemented, "cannot make " + name.to_string() +
                                           ": this build of actorflow has no CUDA support "
                                           "(configured with ACTORFLOW_WITH_CUDA=OFF or without "
                                           "a CUDA compiler)");
}

void make_cuda_devices(const device_factory_options&, made_devices& made) {
  made.notes.push_back("no GPU devices: this build of actorflow has no CUDA support");
}

} // namespace actorflow
