import Foundation
import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// Session 33 (helper 5): `compactionPlan(_:)`, what `strata compact` plans its steps with.
@Suite("Event log: a compaction's plan reads no event")
struct CompactionPlanTests {
    /// The store's size: `STRATA_COMPACTION_PLAN_EVENTS` transactions (default 600).
    static var transactions: Int { ProcessInfo.processInfo.environment["STRATA_COMPACTION_PLAN_EVENTS"].flatMap(Int.init) ?? 600 }

    @Test(
        "compactionPlan gives the range, horizon and limit a dry run gives, reading no raw event; steps planned with it read each event of the range once (a dry run plan read it twice)"
    )
    func planReadsNoEvent() throws {
        let dir = try TemporaryDirectory()
        let count = Self.transactions
        let log = try populatedLog(dir, transactions: count)
        let before = UInt64(count - 10)
        let request = CompactionRequest(before: before)

        let plan = try log.compactionPlan(request)
        #expect(log.compactionEventReadCount == 0, "the plan read raw events")
        var probe = request
        probe.dryRun = true
        let dry = try log.compact(probe)
        #expect(plan.range == dry.moved && plan.horizon == dry.horizon && plan.limitedBy == dry.limitedBy)
        #expect(plan.range == 1...(before - 1))
        #expect(log.compactionEventReadCount == before - 1, "a dry run reads the range")

        // In steps, as strata compact moves them: each event read once.
        let start = log.compactionEventReadCount
        let range = try #require(plan.range)
        var next = range.lowerBound
        while next <= range.upperBound {
            let report = try log.compact(CompactionRequest(before: min(range.upperBound, next + 99) + 1))
            next = try #require(report.moved).upperBound + 1
        }
        #expect(log.compactionEventReadCount - start == UInt64(range.count))
        #expect(try log.compactionPlan(request).range == nil)

        // Limited by a consumer: still no raw event read.
        let head = try log.head
        try log.registerConsumer("indexer", processedThrough: head - 3)
        let reads = log.compactionEventReadCount
        let limited = try log.compactionPlan(CompactionRequest())
        #expect(limited.range == before...(head - 3))
        #expect(limited.limitedBy == .consumer(name: "indexer", processedThrough: head - 3))
        #expect(log.compactionEventReadCount == reads)
    }
}
