import ArgumentParser
import Strata

/// `strata verify`: the event log's full check.
struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check a store: checksums, segments, sequence numbers, derived tables rebuilt from the log, references.",
        discussion: """
            Replays the whole log into a scratch environment in the temporary directory and
            compares every derived table with the live one. Prints each problem on its own line
            as KIND: LOCATION: MESSAGE, then a summary line. Exit status 1 if anything is wrong.
            The store is opened read-only.

            Examples:
              strata verify League.strata
              strata verify League.strata || echo "damaged"
            """
    )

    @OptionGroup var options: StoreOptions

    func run() throws {
        try runCommand {
            let log = try options.openReadOnly()
            let report = try log.verify()
            let out = OutputSink()
            defer { out.close() }
            for problem in report.problems { out.line(problem.description) }
            func count(_ n: Int, _ noun: String) -> String { "\(n) \(noun)\(n == 1 ? "" : "s")" }
            let summary = "checked \(count(report.eventsChecked, "event")) in \(count(report.segmentsChecked, "segment")) and the raw log, rebuilt \(count(report.objectsRebuilt, "object"))"
            if report.isClean {
                out.line("\(summary): no problems")
            } else {
                out.line("\(summary): \(report.problems.count) problem\(report.problems.count == 1 ? "" : "s")")
                out.close()
                throw ExitStatus.failure
            }
        }
    }
}
