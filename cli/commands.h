// The `touchstone` command table. Each function declares its commands under `root` (the
// program, services/common/flags.h): a name, a one-line summary, the action, and the flags bound
// to a struct the action reads. AddTouchstoneCommands (commands.cc) calls them in the order
// `touchstone help` lists them; `help`, `completion`, --help and --version come from the flags
// library.
//
// Adding a command (cli/README.md, "Adding a command"):
//   auto f = std::make_shared<RefsFlags>();
//   flags::Command& c = root.Add("refs", "reference bundles", [f] { return Refs(*f); });
//   c.Option("--bundle", &f->bundle, "DIR", "the bundle folder").Required().Dir();
//   AddClientFlags(c, &f->client);  // a client of a running scheduler
// and one line in AddTouchstoneCommands.
//
// Exit codes, every command: 0 done, 2 usage or unusable input (the flag or field named),
// 1 failure; the commands that call a scheduler: 2 also for a refused request, 3 no answer
// (client.h RpcExitCode).
//
// Thread-safety: one command per process, on the main thread.
#pragma once

#include "services/common/flags.h"

namespace ts::cli {

// Every command below, on `touchstone` (main.cc; commands_test.cc runs them in process).
void AddTouchstoneCommands(flags::Program& touchstone);

// run_model.cc: run-model, summarize.
void AddRunModelCommands(flags::Command& root);
// zoo_command.cc: zoo list | supports | export.
void AddZooCommands(flags::Command& root);
// catalog_command.cc: catalog generate | import, run-catalog.
void AddCatalogCommands(flags::Command& root);
// sweep.cc: sweep (a private cluster: embedded PostgreSQL, scheduler, workers).
void AddSweepCommand(flags::Command& root);
// serve.cc: serve (the scheduler without workers over stored sweeps).
void AddServeCommand(flags::Command& root);
// submit.cc: submit (a sweep on a running fleet).
void AddSubmitCommand(flags::Command& root);
// schedule.cc: schedule add | list | rm | enable | disable.
void AddScheduleCommands(flags::Command& root);
// db.cc: db migrate | prune | workers.
void AddDbCommands(flags::Command& root);
// query.cc (ts_cli_query, no torch): sweeps, summary, model, ops, breaks, suspects, compare,
// gate, alerts [ack | watch | quarantine], detect.
void AddQueryCommands(flags::Command& root);

}  // namespace ts::cli
