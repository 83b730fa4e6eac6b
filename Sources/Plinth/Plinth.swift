// Placeholder until the session API lands (issue 5).
enum PlinthModule {}
