// The expansions of the sources in Cases, as reviewed.
enum Expected {
    static let allGuides = #"""
        struct Character {
            var name: String
            var kind: String
            var code: String
            var phone: String?
            var level: Int
            var speed: Double
            var tags: [String]
            var dice: [Int]
            var friends: [Character]
            let fixed = 1
            var computed: Int { 2 }
            static var shared = 3

            nonisolated static var generationSchema: GenerationSchema {
                GenerationSchema(type: Self.self, description: "A character", properties: [GenerationSchema.Property(name: "name", description: "Name", type: String.self, guides: [.constant("Ser Plinth")]), GenerationSchema.Property(name: "kind", type: String.self, guides: [.anyOf(["a", "b"])]), GenerationSchema.Property(name: "code", type: String.self, guides: [.pattern(/[a-z]+/)]), GenerationSchema.Property(name: "phone", description: "A phone number", type: String?.self, guides: [/\d{3}-\d{4}/]), GenerationSchema.Property(name: "level", type: Int.self, guides: [.range(1 ... 100)]), GenerationSchema.Property(name: "speed", type: Double.self, guides: [.minimum(0.5), .maximum(2.5)]), GenerationSchema.Property(name: "tags", type: [String].self, guides: [.count(3)]), GenerationSchema.Property(name: "dice", type: [Int].self, guides: [.count(1 ... 4), .element(.range(1 ... 6))]), GenerationSchema.Property(name: "friends", type: [Character].self, guides: [.minimumCount(1), .maximumCount(5)])])
            }

            nonisolated struct PartiallyGenerated: Identifiable, ConvertibleFromGeneratedContent {
                var id: GenerationID
                var name: String.PartiallyGenerated?
                var kind: String.PartiallyGenerated?
                var code: String.PartiallyGenerated?
                var phone: String.PartiallyGenerated?
                var level: Int.PartiallyGenerated?
                var speed: Double.PartiallyGenerated?
                var tags: [String].PartiallyGenerated?
                var dice: [Int].PartiallyGenerated?
                var friends: [Character].PartiallyGenerated?
                nonisolated init(_ content: GeneratedContent) throws {
                    self.id = content.id ?? GenerationID()
                    self.name = content._partialValue(String.PartiallyGenerated.self, forProperty: "name")
                    self.kind = content._partialValue(String.PartiallyGenerated.self, forProperty: "kind")
                    self.code = content._partialValue(String.PartiallyGenerated.self, forProperty: "code")
                    self.phone = content._partialValue(String.PartiallyGenerated.self, forProperty: "phone")
                    self.level = content._partialValue(Int.PartiallyGenerated.self, forProperty: "level")
                    self.speed = content._partialValue(Double.PartiallyGenerated.self, forProperty: "speed")
                    self.tags = content._partialValue([String].PartiallyGenerated.self, forProperty: "tags")
                    self.dice = content._partialValue([Int].PartiallyGenerated.self, forProperty: "dice")
                    self.friends = content._partialValue([Character].PartiallyGenerated.self, forProperty: "friends")
                }
            }
        }

        extension Character: Generable {
            nonisolated init(_ content: GeneratedContent) throws {
                self.name = try content.value(forProperty: "name")
                self.kind = try content.value(forProperty: "kind")
                self.code = try content.value(forProperty: "code")
                self.phone = try content.value(forProperty: "phone")
                self.level = try content.value(forProperty: "level")
                self.speed = try content.value(forProperty: "speed")
                self.tags = try content.value(forProperty: "tags")
                self.dice = try content.value(forProperty: "dice")
                self.friends = try content.value(forProperty: "friends")
            }
            nonisolated var generatedContent: GeneratedContent {
                GeneratedContent._object([("name", self.name), ("kind", self.kind), ("code", self.code), ("phone", self.phone), ("level", self.level), ("speed", self.speed), ("tags", self.tags), ("dice", self.dice), ("friends", self.friends)], representNilExplicitly: false)
            }
        }
        """#

    static let simpleEnum = #"""
        public enum Team {
            case red, blue
            case `default`

            public nonisolated static var generationSchema: GenerationSchema {
                GenerationSchema(type: Self.self, description: "A team", anyOf: ["red", "blue", "default"])
            }
        }

        extension Team: Generable {
            public nonisolated init(_ content: GeneratedContent) throws {
                let value = try content.value(String.self)
                switch value {
                case "red":
                    self = .red
                case "blue":
                    self = .blue
                case "default":
                    self = .`default`
                default:
                    throw GeneratedContent._unknownCase(value, of: Self.self)
                }
            }
            public nonisolated var generatedContent: GeneratedContent {
                switch self {
                case .red:
                    GeneratedContent(kind: .string("red"))
                case .blue:
                    GeneratedContent(kind: .string("blue"))
                case .`default`:
                    GeneratedContent(kind: .string("default"))
                }
            }
        }
        """#

    static let payloadEnum = #"""
        enum Action {
            case idle
            case attack(target: String, damage: Int)
            case move(Int, Int?)

            nonisolated static var generationSchema: GenerationSchema {
                GenerationSchema._enumeration(type: Self.self, description: nil, cases: [GenerationSchema._EnumerationCase(name: "idle"), GenerationSchema._EnumerationCase(name: "attack", properties: [GenerationSchema.Property(name: "target", type: String.self), GenerationSchema.Property(name: "damage", type: Int.self)]), GenerationSchema._EnumerationCase(name: "move", properties: [GenerationSchema.Property(name: "_0", type: Int.self), GenerationSchema.Property(name: "_1", type: Int?.self)])])
            }
        }

        extension Action: Generable {
            nonisolated init(_ content: GeneratedContent) throws {
                let (caseName, payload) = try content._enumerationCase()
                switch caseName {
                case "idle":
                    self = .idle
                case "attack":
                    let values = try GeneratedContent._payload(payload, forCase: "attack")
                    self = .attack(target: try values.value(forProperty: "target"), damage: try values.value(forProperty: "damage"))
                case "move":
                    let values = try GeneratedContent._payload(payload, forCase: "move")
                    self = .move(try values.value(forProperty: "_0"), try values.value(forProperty: "_1"))
                default:
                    throw GeneratedContent._unknownCase(caseName, of: Self.self)
                }
            }
            nonisolated var generatedContent: GeneratedContent {
                switch self {
                case .idle:
                    GeneratedContent(kind: .string("idle"))
                case .attack(let v0, let v1):
                    GeneratedContent._enumerationCase("attack", [("target", v0), ("damage", v1)])
                case .move(let v0, let v1):
                    GeneratedContent._enumerationCase("move", [("_0", v0), ("_1", v1)])
                }
            }
        }
        """#

    static let options = #"""
        struct Options: Sendable {
            var id: String
            var note: String?

            nonisolated static var generationSchema: GenerationSchema {
                GenerationSchema(type: Self.self, description: "x", representNilExplicitlyInGeneratedContent: true, properties: [GenerationSchema.Property(name: "id", type: String.self), GenerationSchema.Property(name: "note", type: String?.self)])._named("Renamed")
            }

            nonisolated struct PartiallyGenerated: ConvertibleFromGeneratedContent, Sendable {
                var id: String.PartiallyGenerated?
                var note: String.PartiallyGenerated?
                nonisolated init(_ content: GeneratedContent) throws {
                    self.id = content._partialValue(String.PartiallyGenerated.self, forProperty: "id")
                    self.note = content._partialValue(String.PartiallyGenerated.self, forProperty: "note")
                }
            }
        }

        extension Options: Generable {
            nonisolated init(_ content: GeneratedContent) throws {
                self.id = try content.value(forProperty: "id")
                self.note = try content.value(forProperty: "note")
            }
            nonisolated var generatedContent: GeneratedContent {
                GeneratedContent._object([("id", self.id), ("note", self.note)], representNilExplicitly: true)
            }
        }
        """#
}
