// Placeholder until the constrained decoder lands (issue 4).
enum PlinthGrammarModule {}
