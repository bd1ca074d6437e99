import Foundation

// Strata's benchmarks: each runs Strata and its peers (the raw-LMDB floor, GRDB, the zstd
// CLI) in this one process and prints ratios, with absolute times for context.
//
//     swift run -c release StrataBenchmarks [filter…]
//
// Filters (any substring): commit, small, scan, compaction, open, context, fetch, merge, batch, derived, migration, revert, history
// (or one of history-feed, history-consumers, history-queries). Sizes and repetitions
// come from the environment (see README.md).

// The writer process of the history benchmark (H1) is this binary, run with `history-writer`.
if CommandLine.arguments.dropFirst().first == "history-writer" { runHistoryWriter(Array(CommandLine.arguments.dropFirst(2))) }

let arguments = Array(CommandLine.arguments.dropFirst())
// The second process of the merge benchmark (MergeBenchmarks.swift).
if arguments.first == "merge-writer" { runMergeWriter(Array(arguments.dropFirst())) }
func wanted(_ name: String) -> Bool {
    arguments.isEmpty || arguments.contains { name.contains($0.lowercased()) }
}

let objects = environmentInt("STRATA_BENCH_OBJECTS", 100_000)
let commits = environmentInt("STRATA_BENCH_COMMITS", 2_000)
let events = environmentInt("STRATA_BENCH_EVENTS", 1_000_000)
let repetitions = environmentInt("STRATA_BENCH_REPS", 5)
let contextTeamObjects = environmentInt("STRATA_BENCH_CONTEXT_TEAM_OBJECTS", 100_000)
let undoChanges = environmentInt("STRATA_BENCH_UNDO_CHANGES", 10_000)
let iterateObjects = environmentInt("STRATA_BENCH_ITERATE", 1_000_000)
let feedTransactions = environmentInt("STRATA_BENCH_FEED_TRANSACTIONS", 10_000)
let historyEvents = environmentInt("STRATA_BENCH_HISTORY_EVENTS", 100_000)
let fetchObjects = environmentInt("STRATA_BENCH_FETCH_OBJECTS", 100_000)
let fetchLargeObjects = environmentInt("STRATA_BENCH_FETCH_LARGE", 1_000_000)
let fetchLookups = environmentInt("STRATA_BENCH_FETCH_LOOKUPS", 1_000)
let mergeSaves = environmentInt("STRATA_BENCH_MERGE_SAVES", 1_000)

say("Strata benchmarks — \(ProcessInfo.processInfo.activeProcessorCount) cores, \(Date())")
say("objects \(objects), small commits \(commits), events \(events), repetitions \(repetitions) after 1 warm-up")

do {
    if wanted("commit") { try runCommitBenchmark(objects: objects, repetitions: repetitions) }
    if wanted("small") { try runSmallCommitsBenchmark(commits: commits, repetitions: repetitions) }
    if wanted("scan") || wanted("compaction") || wanted("open") {
        let stores = try buildEventStores(events: events)
        defer { remove(stores.base) }
        if wanted("scan") { try runScanBenchmark(stores, repetitions: repetitions) }
        if wanted("open") { try runOpenBenchmark(stores, repetitions: max(repetitions, 21)) }
        if wanted("compaction") || wanted("scan") { try runCompactionBenchmark(stores, scanRepetitions: repetitions) }
    }
    if wanted("context") {
        try runContextBenchmarks(objects: objects, teamObjects: contextTeamObjects, undoChanges: undoChanges, iterateObjects: iterateObjects, repetitions: repetitions)
    }
    if wanted("history-feed") || wanted("history-consumers") || wanted("history-queries") {
        try runHistoryBenchmarks(
            feedTransactions: feedTransactions, commits: commits, events: historyEvents, repetitions: repetitions, wanted: wanted)
    }
    if wanted("fetch") {
        try runFetchBenchmarks(objects: fetchObjects, largeObjects: fetchLargeObjects, lookups: fetchLookups, repetitions: repetitions)
    }
    if wanted("related-fetch") { try runRelatedFetchBenchmarks(objects: fetchObjects, repetitions: repetitions) }
    if wanted("merge") { try runMergeBenchmarks(saves: mergeSaves) }
    if wanted("batch") { try runBatchBenchmarks(objects: objects, repetitions: repetitions) }
    if wanted("derived") {
        try runDerivedBenchmarks(
            departments: environmentInt("STRATA_BENCH_DERIVED_DEPARTMENTS", 10), perDepartment: environmentInt("STRATA_BENCH_DERIVED_EMPLOYEES", 10_000),
            saves: environmentInt("STRATA_BENCH_DERIVED_SAVES", 200), repetitions: repetitions)
    }
    if wanted("migration") { try runMigrationBenchmarks(objects: objects, repetitions: repetitions) }
    if wanted("revert") { try runRevertBenchmarks(objects: objects, changes: undoChanges, repetitions: repetitions) }
    // Opt-in (not part of a full run): the context layer's scaling probe.
    if arguments.contains("scale") {
        let sizes = (environmentString("STRATA_BENCH_SCALE_SIZES") ?? "1000,2000,4000").split(separator: ",").compactMap { Int($0) }
        try runScaleProbe(sizes: sizes)
    }
} catch {
    say("benchmark failed: \(error)")
    exit(1)
}

heading("Summary")
var lastBenchmark = ""
// Grouped by benchmark number, figures in the order they were measured.
let ordered = summary.enumerated().sorted { ($0.element.benchmark, $0.offset) < ($1.element.benchmark, $1.offset) }.map(\.element)
for row in ordered {
    if row.benchmark != lastBenchmark {
        say(row.benchmark)
        lastBenchmark = row.benchmark
    }
    let target = row.target.isEmpty ? "" : "   target \(row.target)"
    say("  \(row.figure): \(row.value)\(target)")
}
