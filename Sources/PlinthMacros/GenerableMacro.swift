import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxBuilder
import SwiftSyntaxMacros

/// `@Generable`: the schema, the conversions from and to `GeneratedContent`, and the
/// `PartiallyGenerated` type of a struct or an enum.
public struct GenerableMacro: MemberMacro, ExtensionMacro {
    // MARK: Reading the declaration

    struct Property {
        var name: String          // as in JSON
        var identifier: String    // as in code
        var type: TypeSyntax
        var base: TypeSyntax      // without Optional
        var isOptional: Bool
        var description: ExprSyntax?
        var guides: [ExprSyntax]
        var regexes: [ExprSyntax]

        /// A `GenerationID` property is the value's identity, not generated: the macro sets it
        /// from the content's id, as Apple's does.
        var isGenerationID: Bool {
            ["GenerationID", "FoundationModels.GenerationID", "Plinth.GenerationID"].contains(base.trimmedDescription)
        }
    }

    struct Case {
        var name: String
        var identifier: String
        var parameters: [(label: String?, type: TypeSyntax)]?
    }

    struct Options {
        var description: ExprSyntax?
        var name: ExprSyntax?
        var explicitNil: ExprSyntax?

        init(_ node: AttributeSyntax) {
            guard case .argumentList(let arguments) = node.arguments else { return }
            for argument in arguments {
                switch argument.label?.text {
                case "description": description = argument.expression.trimmed
                case "name": name = argument.expression.trimmed
                case "representNilExplicitlyInGeneratedContent": explicitNil = argument.expression.trimmed
                default: break
                }
            }
        }
    }

    static func isStored(_ binding: PatternBindingSyntax) -> Bool {
        guard let accessors = binding.accessorBlock else { return true }
        switch accessors.accessors {
        case .getter: return false
        case .accessors(let list):
            return list.allSatisfy { ["willSet", "didSet"].contains($0.accessorSpecifier.text) }
        }
    }

    /// The stored instance properties, or `nil` after reporting a problem.
    static func properties(of decl: some DeclGroupSyntax, in context: some MacroExpansionContext,
                           diagnose: Bool) -> [Property]? {
        var result: [Property] = []
        var valid = true
        for member in decl.memberBlock.members {
            guard let variable = member.decl.as(VariableDeclSyntax.self) else { continue }
            if variable.modifiers.contains(where: { ["static", "class", "lazy"].contains($0.name.text) }) { continue }
            let isLet = variable.bindingSpecifier.tokenKind == .keyword(.let)
            let guide = GuideAnalysis.guideAttribute(of: variable).map(GuideArguments.init)
            let bindings = Array(variable.bindings)
            for (index, binding) in bindings.enumerated() {
                guard let pattern = binding.pattern.as(IdentifierPatternSyntax.self), isStored(binding) else { continue }
                if isLet && binding.initializer != nil { continue }
                let name = TypeAnalysis.plainName(pattern.identifier)
                guard let type = (binding.typeAnnotation ?? bindings[index...].first { $0.typeAnnotation != nil }?.typeAnnotation)?
                    .type else {
                    if diagnose {
                        context.diagnose(Diagnostic(node: pattern, message: PlinthDiagnostic.missingTypeAnnotation(property: name)))
                    }
                    valid = false
                    continue
                }
                if let reason = TypeAnalysis.unsupportedReason(type) {
                    if diagnose {
                        context.diagnose(Diagnostic(node: type, message: PlinthDiagnostic.unsupportedPropertyType(
                            property: name, type: type.trimmedDescription, reason: reason)))
                    }
                    valid = false
                    continue
                }
                let (base, isOptional) = TypeAnalysis.unwrapOptional(type)
                result.append(Property(name: name, identifier: pattern.identifier.text, type: type.trimmed, base: base,
                                       isOptional: isOptional, description: guide?.description,
                                       guides: guide?.guides ?? [], regexes: guide?.regexes ?? []))
            }
        }
        return valid ? result : nil
    }

    static func cases(of decl: EnumDeclSyntax, in context: some MacroExpansionContext, diagnose: Bool) -> [Case]? {
        var result: [Case] = []
        var valid = true
        for member in decl.memberBlock.members {
            guard let caseDecl = member.decl.as(EnumCaseDeclSyntax.self) else { continue }
            for element in caseDecl.elements {
                let name = TypeAnalysis.plainName(element.name)
                var parameters: [(String?, TypeSyntax)]?
                if let clause = element.parameterClause {
                    parameters = []
                    for parameter in clause.parameters {
                        let label = parameter.firstName.map { $0.text == "_" ? nil : TypeAnalysis.plainName($0) } ?? nil
                        if let reason = TypeAnalysis.unsupportedReason(parameter.type) {
                            if diagnose {
                                context.diagnose(Diagnostic(node: parameter.type, message: PlinthDiagnostic.unsupportedEnumCase(
                                    name: name, reason: "its associated value of type '\(parameter.type.trimmedDescription)' isn't Generable: \(reason)")))
                            }
                            valid = false
                        }
                        parameters?.append((label, parameter.type.trimmed))
                    }
                    if clause.parameters.isEmpty { parameters = nil }
                }
                result.append(Case(name: name, identifier: element.name.text, parameters: parameters))
            }
        }
        return valid ? result : nil
    }

    static func access(of decl: some DeclGroupSyntax) -> String {
        for modifier in decl.modifiers {
            switch modifier.name.text {
            case "public", "open": return "public "
            case "package": return "package "
            default: continue
            }
        }
        return ""
    }

    static func kindName(_ decl: some DeclGroupSyntax) -> String? {
        if decl.is(StructDeclSyntax.self) || decl.is(EnumDeclSyntax.self) { return nil }
        if decl.is(ClassDeclSyntax.self) { return "a class" }
        if decl.is(ActorDeclSyntax.self) { return "an actor" }
        if decl.is(ProtocolDeclSyntax.self) { return "a protocol" }
        if decl.is(ExtensionDeclSyntax.self) { return "an extension" }
        return "this declaration"
    }

    static func inherits(_ decl: some DeclGroupSyntax, _ name: String) -> Bool {
        decl.inheritanceClause?.inheritedTypes.contains { $0.type.trimmedDescription == name } ?? false
    }

    // MARK: Member role: the schema and PartiallyGenerated

    public static func expansion(of node: AttributeSyntax, providingMembersOf declaration: some DeclGroupSyntax,
                                 conformingTo protocols: [TypeSyntax],
                                 in context: some MacroExpansionContext) throws -> [DeclSyntax] {
        if let kind = kindName(declaration) {
            context.diagnose(Diagnostic(node: node, message: PlinthDiagnostic.notStructOrEnum(kind: kind)))
            return []
        }
        let options = Options(node)
        let access = access(of: declaration)
        let description = options.description?.description ?? "nil"
        let rename = options.name.map { "._named(\($0))" } ?? ""

        if let enumDecl = declaration.as(EnumDeclSyntax.self) {
            guard let cases = cases(of: enumDecl, in: context, diagnose: true) else { return [] }
            let schema: String
            if cases.allSatisfy({ $0.parameters == nil }) {
                let names = cases.map { "\"\($0.name)\"" }.joined(separator: ", ")
                schema = "GenerationSchema(type: Self.self, description: \(description), anyOf: [\(names)])\(rename)"
            } else {
                let entries = cases.map { c -> String in
                    guard let parameters = c.parameters else { return "GenerationSchema._EnumerationCase(name: \"\(c.name)\")" }
                    let properties = parameters.enumerated().map { index, parameter in
                        propertyExpression(name: parameter.label ?? "_\(index)", type: parameter.type, description: nil,
                                           guides: [], regexes: [])
                    }
                    return "GenerationSchema._EnumerationCase(name: \"\(c.name)\", properties: [\(properties.joined(separator: ", "))])"
                }
                schema = "GenerationSchema._enumeration(type: Self.self, description: \(description), cases: [\(entries.joined(separator: ", "))])\(rename)"
            }
            return ["\(raw: access)nonisolated static var generationSchema: GenerationSchema {\n\(raw: schema)\n}"]
        }

        guard let all = properties(of: declaration, in: context, diagnose: true) else { return [] }
        let properties = all.filter { !$0.isGenerationID }
        let identities = all.filter(\.isGenerationID)
        // Each @Guide checks its own guides (GuideMacro), so they are reported once.
        let list = properties.map {
            propertyExpression(name: $0.name, type: $0.type, description: $0.description?.trimmedDescription,
                               guides: $0.guides, regexes: $0.regexes)
        }
        let explicitNil = options.explicitNil.map { "representNilExplicitlyInGeneratedContent: \($0), " } ?? ""
        let schema = "GenerationSchema(type: Self.self, description: \(description), \(explicitNil)properties: [\(list.joined(separator: ", "))])\(rename)"

        let hasID = all.contains { $0.name == "id" }
        let idIsGenerationID = identities.contains { $0.name == "id" }
        var conformances = hasID && !idIsGenerationID ? ["ConvertibleFromGeneratedContent"] : ["Identifiable", "ConvertibleFromGeneratedContent"]
        if inherits(declaration, "Sendable") { conformances.append("Sendable") }
        var partial = "\(access)nonisolated struct PartiallyGenerated: \(conformances.joined(separator: ", ")) {\n"
        if !hasID { partial += "\(access)var id: GenerationID\n" }
        for identity in identities { partial += "\(access)var \(identity.identifier): \(identity.type.trimmedDescription)\n" }
        for property in properties {
            partial += "\(access)var \(property.identifier): \(property.base.trimmedDescription).PartiallyGenerated?\n"
        }
        partial += "\(access)nonisolated init(_ content: GeneratedContent) throws {\n"
        if !hasID { partial += "self.id = content.id ?? GenerationID()\n" }
        for identity in identities { partial += "self.\(identity.identifier) = content.id ?? GenerationID()\n" }
        for property in properties {
            partial += "self.\(property.identifier) = content._partialValue(\(property.base.trimmedDescription).PartiallyGenerated.self, forProperty: \"\(property.name)\")\n"
        }
        partial += "}\n}"
        return [
            "\(raw: access)nonisolated static var generationSchema: GenerationSchema {\n\(raw: schema)\n}",
            "\(raw: partial)",
        ]
    }

    static func propertyExpression(name: String, type: TypeSyntax, description: String?, guides: [ExprSyntax],
                                   regexes: [ExprSyntax]) -> String {
        var text = "GenerationSchema.Property(name: \"\(name)\""
        if let description { text += ", description: \(description)" }
        text += ", type: \(type.trimmedDescription).self"
        if !regexes.isEmpty {
            text += ", guides: [\(regexes.map(\.trimmedDescription).joined(separator: ", "))]"
        } else if !guides.isEmpty {
            text += ", guides: [\(guides.map(\.trimmedDescription).joined(separator: ", "))]"
        }
        return text + ")"
    }

    // MARK: Extension role: the conformance and the conversions

    public static func expansion(of node: AttributeSyntax, attachedTo declaration: some DeclGroupSyntax,
                                 providingExtensionsOf type: some TypeSyntaxProtocol, conformingTo protocols: [TypeSyntax],
                                 in context: some MacroExpansionContext) throws -> [ExtensionDeclSyntax] {
        guard kindName(declaration) == nil else { return [] }
        let options = Options(node)
        let access = access(of: declaration)
        let conformance = protocols.isEmpty ? "" : ": " + protocols.map(\.trimmedDescription).joined(separator: ", ")
        var body = ""

        if let enumDecl = declaration.as(EnumDeclSyntax.self) {
            guard let cases = cases(of: enumDecl, in: context, diagnose: false) else { return [] }
            if cases.allSatisfy({ $0.parameters == nil }) {
                body += "\(access)nonisolated init(_ content: GeneratedContent) throws {\n"
                body += "let value = try content.value(String.self)\nswitch value {\n"
                for c in cases { body += "case \"\(c.name)\":\nself = .\(c.identifier)\n" }
                body += "default:\nthrow GeneratedContent._unknownCase(value, of: Self.self)\n}\n}\n"
                body += "\(access)nonisolated var generatedContent: GeneratedContent {\nswitch self {\n"
                for c in cases { body += "case .\(c.identifier):\nGeneratedContent(kind: .string(\"\(c.name)\"))\n" }
                body += "}\n}"
            } else {
                body += "\(access)nonisolated init(_ content: GeneratedContent) throws {\n"
                body += "let (caseName, payload) = try content._enumerationCase()\nswitch caseName {\n"
                for c in cases {
                    body += "case \"\(c.name)\":\n"
                    if let parameters = c.parameters {
                        body += "let values = try GeneratedContent._payload(payload, forCase: \"\(c.name)\")\n"
                        let arguments = parameters.enumerated().map { index, parameter in
                            let key = parameter.label ?? "_\(index)"
                            // The parameter's type is inferred, not named: the extension is
                            // outside the type, where names of its enclosing types don't resolve.
                            let read = "try values.value(forProperty: \"\(key)\")"
                            return parameter.label.map { "\($0): \(read)" } ?? read
                        }
                        body += "self = .\(c.identifier)(\(arguments.joined(separator: ", ")))\n"
                    } else {
                        body += "self = .\(c.identifier)\n"
                    }
                }
                body += "default:\nthrow GeneratedContent._unknownCase(caseName, of: Self.self)\n}\n}\n"
                body += "\(access)nonisolated var generatedContent: GeneratedContent {\nswitch self {\n"
                for c in cases {
                    if let parameters = c.parameters {
                        let bindings = parameters.indices.map { "let v\($0)" }.joined(separator: ", ")
                        let values = parameters.enumerated().map { index, parameter in
                            "(\"\(parameter.label ?? "_\(index)")\", v\(index))"
                        }
                        body += "case .\(c.identifier)(\(bindings)):\nGeneratedContent._enumerationCase(\"\(c.name)\", [\(values.joined(separator: ", "))])\n"
                    } else {
                        body += "case .\(c.identifier):\nGeneratedContent(kind: .string(\"\(c.name)\"))\n"
                    }
                }
                body += "}\n}"
            }
        } else {
            guard let all = properties(of: declaration, in: context, diagnose: false) else { return [] }
            let properties = all.filter { !$0.isGenerationID }
            body += "\(access)nonisolated init(_ content: GeneratedContent) throws {\n"
            // The types are inferred from the properties, not named: the extension is outside
            // the type, where names of its enclosing types don't resolve.
            for property in properties {
                body += "self.\(property.identifier) = try content.value(forProperty: \"\(property.name)\")\n"
            }
            for identity in all where identity.isGenerationID {
                body += "self.\(identity.identifier) = content.id ?? GenerationID()\n"
            }
            body += "}\n"
            let explicitNil = options.explicitNil?.trimmedDescription ?? "false"
            let pairs = properties.map { "(\"\($0.name)\", self.\($0.identifier))" }.joined(separator: ", ")
            body += "\(access)nonisolated var generatedContent: GeneratedContent {\n"
            body += "GeneratedContent._object([\(pairs)], representNilExplicitly: \(explicitNil))\n}"
        }
        let decl: DeclSyntax = "extension \(raw: type.trimmedDescription)\(raw: conformance) {\n\(raw: body)\n}"
        guard let ext = decl.as(ExtensionDeclSyntax.self) else { return [] }
        return [ext]
    }
}
