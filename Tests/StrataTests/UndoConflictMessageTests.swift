import Foundation
import Strata
import StrataTestSupport
import Testing

/// The message of an undo refused because the store holds a later value (spec 0006 §13).
@Suite("Undo conflicts: the message")
struct UndoConflictMessageTests {
    @Test("a value this context saved with undo registration disabled refuses the undo of an earlier group on the same property; the message says the change isn't on this undo stack (another context's, or one made with registration disabled), not that another writer made it")
    func changeSavedWithRegistrationDisabled() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, teamID) = try await leagueStore(dir)
        try await privateContext(coordinator, name: "editor", author: "alice").perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.existingObject(with: teamID)
            team.setValue("Herons", forKey: "name")
            try context.save()
            context.disableUndoRegistration()
            team.setValue("Comets", forKey: "name")
            try context.save()
            context.enableUndoRegistration()
            #expect {
                try context.undo()
            } throws: { error in
                guard case .undoConflict(_, let property, let expected, let found) = error as? ContextError else { return false }
                let text = (error as? ContextError)?.description ?? ""
                return property == "name" && expected.contains("Herons") && found.contains("Comets")
                    && text.contains("written later by a change not on this undo stack (another context's, or one made with undo registration disabled)")
                    && !text.contains("written by another change")
            }
            #expect(team.value(forKey: "name") as? String == "Comets", "nothing was overwritten")
        }
    }
}
