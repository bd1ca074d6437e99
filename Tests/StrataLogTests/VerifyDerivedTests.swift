import Foundation
import StrataLog
import StrataModel
import StrataTestSupport
import Testing

/// Verify computes every derived attribute afresh over the replayed state (spec 0004 §8):
/// a stored derived value its derivation doesn't give is reported, naming the object, the
/// attribute, the derivation and both values — unless a model version that doesn't maintain
/// it wrote since (its value is legitimately stale until the later version's next open).
@Suite("Event log: verify checks derived values")
struct VerifyDerivedTests {
    static func model(derived: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                if derived {
                    Attribute("size", .int64).derived(from: "members.@count")
                    Attribute("total", .double).derived(from: "members.@sum.score")
                    Attribute("key", .string).derived(from: "lowercase(name)")
                }
                Relationship("members", to: "Member", inverse: "team", toMany: true)
            }
            Entity("Member") {
                Attribute("score", .double)
                Relationship("team", to: "Team", inverse: "members")
            }
        }
    }

    static func member(_ team: StoredObjectID, score: Double) -> TransactionDraft {
        var draft = TransactionDraft()
        _ = draft.insert("Member", values: ["score": .attribute(.double(score)), "team": .reference(.stored(team))])
        return draft
    }

    @Test("derived values kept right are clean (a double sum kept from its stored value included); one a commit left wrong is reported with its derivation and both values")
    func wrongDerivedValue() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try Self.model(derived: true))
        var draft = TransactionDraft()
        let made = draft.insert("Team", values: ["name": s("Otters")])
        let team = try #require(try log.commit(draft).permanentID(for: made))
        var members: [StoredObjectID] = []
        for score in [0.1, 0.2, 0.7, 1e-3, 3.3] {
            let result = try log.commit(Self.member(team, score: score))
            members += result.event.groups.flatMap(\.changes).compactMap { change in
                if case .insert(let id, _) = change, id.entity == "Member" { return id } else { return nil }
            }
        }
        var leave = TransactionDraft()
        leave.delete(.stored(members[0]))
        leave.update(.stored(members[2]), values: ["score": .attribute(.double(0.3))])
        _ = try log.commit(leave)
        let clean = try log.verify()
        #expect(clean.isClean, "\(clean.problems)")

        let buggy = try openLog(dir, model: try Self.model(derived: true)) { $0.skipsDerivations = true }
        _ = try buggy.commit(Self.member(team, score: 2))
        var rename = TransactionDraft()
        rename.update(.stored(team), values: ["name": s("Beavers")])
        _ = try buggy.commit(rename)
        let report = try log.verify()
        let derived = report.problems.filter { $0.kind == .derived }
        #expect(derived.map(\.location).sorted() == ["Team/p1.key", "Team/p1.size", "Team/p1.total"], "\(report.problems)")
        #expect(derived.contains { $0.message == "is stored as 4, but its derivation (members.@count) gives 5" } , "\(derived)")
        #expect(derived.contains { $0.message.hasPrefix("is stored as \"otters\", but its derivation (lowercase(name)) gives \"beavers\"") }, "\(derived)")
        #expect(report.problems.allSatisfy { $0.kind == .derived }, "the log and the state agree: only the derivations say what is wrong")
    }

    @Test("an earlier model version without the derived attributes writing after the later one: not reported (stale until the later version opens, which recomputes them and is clean)")
    func earlierVersionWrites() throws {
        let dir = try TemporaryDirectory()
        let team: StoredObjectID
        do {
            let log = try openLog(dir, model: try Self.model(derived: false))
            var draft = TransactionDraft()
            let made = draft.insert("Team", values: ["name": s("Otters")])
            team = try #require(try log.commit(draft).permanentID(for: made))
            _ = try log.commit(Self.member(team, score: 1))
        }
        let later = try openLog(dir, model: try Self.model(derived: true))
        #expect(try later.read { try $0.object(team) }?.values["size"] == .attribute(.int64(1)), "the migration computed it")
        let earlier = try openLog(dir, model: try Self.model(derived: false))
        _ = try earlier.commit(Self.member(team, score: 2))
        #expect(try later.read { try $0.object(team) }?.values["size"] == .attribute(.int64(1)), "stale: the earlier version doesn't keep it")
        let report = try later.verify()
        #expect(report.isClean, "\(report.problems)")

        let reopened = try openLog(dir, model: try Self.model(derived: true))
        #expect(try reopened.read { try $0.object(team) }?.values["size"] == .attribute(.int64(2)))
        let after = try reopened.verify()
        #expect(after.isClean, "\(after.problems)")
    }
}
