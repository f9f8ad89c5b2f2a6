// `touchstone serve [--state-dir DIR | --db URL]` (commands.h AddServeCommand): the read side
// of past sweeps. Starts the embedded PostgreSQL of a state folder (the one `touchstone sweep
// --state-dir DIR` used), or connects to an existing database, and runs the scheduler without
// workers, so that the query commands, release tooling and the HTTP pages can read what is
// stored. Prints one line
//   serving: grpc=HOST:PORT http=HOST:PORT tokens=FILE
// (FILE holds `role token` lines) on stdout, and stays up until SIGINT/SIGTERM, then stops the
// scheduler and the database in order. `touchstone sweep --serve` prints the same line.
#pragma once

#include <string>

namespace ts::cluster {
class LocalCluster;
}

namespace ts::cli {

// The `serving: ...` line for a running cluster.
std::string ServingLine(const cluster::LocalCluster& c);

}  // namespace ts::cli
