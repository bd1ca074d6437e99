import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Testing

/// Review of compound indexes and relationship equality in the planner: each test is a
/// case where a fetch or a count disagreed with a full scan filtered in memory.
@Suite("Session 21 review: compound indexes and relationship equality")
struct Session21ReviewTests {
    /// The names of the objects `request` fetches, sorted, and what every object of the entity
    /// judged in memory by the request's predicate gives, sorted; with `count(for:)`.
    static func compare(
        _ context: isolated ManagedObjectContext, _ request: FetchRequest
    ) throws -> (got: [String], want: [String], count: Int) {
        let got = try context.fetch(request).map { $0.value(forKey: "name") as? String ?? "?" }.sorted()
        var all = FetchRequest(entityName: request.entityName)
        all.includesSubentities = request.includesSubentities
        all.includesPendingChanges = request.includesPendingChanges
        let want = try context.fetch(all).filter { object in
            try request.predicate?.evaluate(with: object, substitutionVariables: [:]) ?? true
        }.map { $0.value(forKey: "name") as? String ?? "?" }.sorted()
        return (got, want, try context.count(for: request))
    }

    @Test("a comparison inside an OR united on one compound prefix is not answered for the same comparison outside it")
    func unitedCompoundAnswersOnlyTheOr() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try CompoundIndexTests.model())
        try await CompoundIndexTests.populate(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // Reds score 7: p51; no Red scores 14 (p2 and p52 do).
            let request = try CompoundIndexTests.request("((club == 'Reds' AND score == 7) OR (club == 'Reds' AND score == 14)) AND score == 14")
            let (got, want, count) = try Self.compare(context, request)
            let plan = try context.explain(request)
            #expect(want == [])
            #expect(got == want, "plan: \(plan)")
            #expect(count == want.count)
        }
    }

    @Test("an index union keeps an OR whose branch its member reads only in part")
    func unionMemberWithPartlyAnsweredBranch() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try CompoundIndexTests.model())
        try await CompoundIndexTests.populate(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            // Reds: p3 scores 21, p6 scores 42; p15 scores 5.
            let request = try CompoundIndexTests.request(
                "(club == 'Reds' AND score == 21) OR (club == 'Reds' AND score == 42 AND name BEGINSWITH 'zz') OR score == 5")
            let (got, want, count) = try Self.compare(context, request)
            let plan = try context.explain(request)
            #expect(want == ["p15", "p3"])
            #expect(got == want, "plan: \(plan)")
            #expect(count == want.count)
        }
    }
}
