import Foundation
import StrataModel
import Testing

@testable import StrataLog

/// A record's values are checked against their property's ``EventCodec/ValueKind``
/// (``ModelSchema/Entity/valueKinds``) instead of the property itself: these check the kinds
/// accept exactly what the property-based check accepted.
@Suite("Reading records: value kinds")
struct ValueKindTests {
    /// The check as it was written against the property.
    private func fitsProperty(_ value: LogValue, _ property: ModelSchema.Property) -> Bool {
        switch value {
        case .null: true
        case .attribute(let attribute): property.attributeType.map { attribute.matches($0) } ?? false
        case .reference: property.relationship == .toOne
        case .references: property.relationship == .orderedToMany || property.relationship == .unorderedToMany
        }
    }

    @Test("every value against every kind of property: the kind accepts what the property did")
    func kindsAgreeWithProperties() {
        let types: [AttributeType] = [
            .int16, .int32, .int64, .decimal, .double, .float, .string, .boolean, .date, .binaryData, .uuid, .uri,
            .transformable(valueTypeName: "Colour"),
        ]
        let storages: [ModelSchema.RelationshipStorage] = [
            .toOne, .orderedToMany, .unorderedToMany, .derived(inverseEntity: "Team", inverse: "members"),
        ]
        var properties = types.map {
            ModelSchema.Property(name: "a", code: 0, declaringEntity: "E", attributeType: $0, relationship: nil, destination: nil, isToMany: false)
        }
        properties += storages.map {
            ModelSchema.Property(name: "r", code: 0, declaringEntity: "E", attributeType: nil, relationship: $0, destination: "Team", isToMany: false)
        }
        properties.append(ModelSchema.Property(name: "n", code: 0, declaringEntity: "E", attributeType: nil, relationship: nil, destination: nil, isToMany: false))
        let id = StoredObjectID(entity: "Team", primaryKey: 1)
        let values: [LogValue] = [
            .null, .attribute(.int16(1)), .attribute(.int32(1)), .attribute(.int64(1)), .attribute(.decimal(1)),
            .attribute(.double(1)), .attribute(.float(1)), .attribute(.string("s")), .attribute(.boolean(true)),
            .attribute(.date(Date(timeIntervalSinceReferenceDate: 0))), .attribute(.binaryData(Data([1]))),
            .attribute(.uuid(UUID())), .attribute(.uri(URL(fileURLWithPath: "/x"))), .attribute(.transformable(Data([2]))),
            .reference(id), .references([id]),
        ]
        for property in properties {
            let kind = EventCodec.ValueKind(property)
            for value in values {
                #expect(EventCodec.fits(value, kind) == fitsProperty(value, property), "\(value) in \(property)")
            }
        }
    }
}
