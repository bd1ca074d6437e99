import Foundation
import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// Review probes of verify's check of derived values (spec 0004 §8, session 19): healthy
/// stores must verify clean.
@Suite("Event log: verify checks derived values — review")
struct VerifyDerivedReviewTests {
    static func ledger() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Account") {
                Attribute("name", .string)
                Attribute("balance", .double).derived(from: "entries.@sum.amount")
                Relationship("entries", to: "Entry", inverse: "account", toMany: true)
            }
            Entity("Entry") {
                Attribute("amount", .double)
                Relationship("account", to: "Account", inverse: "entries")
            }
        }
    }

    @Test("a ledger's double balance kept from its stored value through large charges and their refunds, ending near zero: verify is clean (the kept sum's rounding is relative to the amounts it went through, not to the balance)")
    func cancellingDoubleSum() throws {
        let dir = try TemporaryDirectory()
        let log = try openLog(dir, model: try Self.ledger())
        var draft = TransactionDraft()
        let made = draft.insert("Account", values: ["name": s("Checking")])
        let account = try #require(try log.commit(draft).permanentID(for: made))
        var rng = SeededGenerator(state: 19)
        var live: [StoredObjectID] = []
        for _ in 0..<300 {
            var draft = TransactionDraft()
            let cents = Double(Int.random(in: 1_000_000...90_000_000, using: &rng)) / 100
            let entry = draft.insert("Entry", values: ["amount": .attribute(.double(cents)), "account": .reference(.stored(account))])
            if !live.isEmpty, Bool.random(using: &rng) {
                draft.delete(.stored(live.remove(at: Int.random(in: 0..<live.count, using: &rng))))
            }
            let result = try log.commit(draft)
            live += [result.permanentID(for: entry)].compactMap { $0 }
        }
        // Everything refunded but a cent.
        var refund = TransactionDraft()
        for entry in live { refund.delete(.stored(entry)) }
        _ = refund.insert("Entry", values: ["amount": .attribute(.double(0.01)), "account": .reference(.stored(account))])
        _ = try log.commit(refund)
        let balance = try log.read { try $0.object(account) }?.values["balance"]
        let report = try log.verify()
        #expect(report.isClean, "balance \(String(describing: balance)): \(report.problems)")
    }
}

extension VerifyDerivedReviewTests {
    static func league(renamed: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            if renamed {
                Entity("Squad") {
                    Attribute("name", .string)
                    Attribute("size", .int64).derived(from: "members.@count")
                    Attribute("key", .string).derived(from: "canonical(name)")
                    Relationship("members", to: "Member", inverse: "squad", toMany: true)
                }.renamed(from: "Team")
                Entity("Member") {
                    Attribute("points", .decimal)
                    Attribute("squadKey", .string).derived(from: "squad.key")
                    Relationship("squad", to: "Squad", inverse: "members").renamed(from: "team")
                }
            } else {
                Entity("Team") {
                    Attribute("name", .string)
                    Attribute("size", .int64).derived(from: "members.@count")
                    Attribute("key", .string).derived(from: "canonical(name)")
                    Relationship("members", to: "Member", inverse: "team", toMany: true)
                }
                Entity("Member") {
                    Attribute("points", .decimal)
                    Attribute("squadKey", .string).derived(from: "team.key")
                    Relationship("team", to: "Team", inverse: "members")
                }
            }
        }
    }

    @Test("derived attributes (a count, canonical name, a derived-of-derived through a to-one) across a migration renaming the entity and relationship, writes after it, compaction: verify is clean at each step")
    func acrossRenamingMigration() throws {
        let dir = try TemporaryDirectory()
        do {
            let log = try openLog(dir, model: try Self.league(renamed: false))
            var draft = TransactionDraft()
            let made = draft.insert("Team", values: ["name": s("Crème Brûlée")])
            for n in 0..<3 { _ = draft.insert("Member", values: ["points": .attribute(.decimal(Decimal(n) / 3)), "team": .reference(made)]) }
            _ = try log.commit(draft)
            #expect(try log.verify().isClean)
        }
        let later = try openLog(dir, model: try Self.league(renamed: true))
        let squad = try #require(try later.read { reader -> StoredObjectID? in
            var found: StoredObjectID?
            try reader.forEachObjectID(of: "Squad") { id in
                found = id
                return .stop
            }
            return found
        })
        #expect(try later.read { try $0.object(squad) }?.values["size"] == .attribute(.int64(3)))
        var draft = TransactionDraft()
        _ = draft.insert("Member", values: ["squad": .reference(.stored(squad))])
        draft.update(.stored(squad), values: ["name": s("ÉCLAIR")])
        _ = try later.commit(draft)
        let report = try later.verify()
        #expect(report.isClean, "\(report.problems)")
        _ = try later.compact(CompactionRequest(before: try later.head))
        let compacted = try later.verify()
        #expect(compacted.isClean, "\(compacted.problems)")
    }
}
