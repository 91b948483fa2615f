#include "devices/collective.hpp"

namespace actorflow {

collective_rendezvous<host_collective_member>& host_collectives() {
  static collective_rendezvous<host_collective_member> rendezvous;
  return rendezvous;
}

} // namespace actorflow
