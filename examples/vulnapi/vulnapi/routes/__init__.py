"""HTTP blueprints: users, posts, admin."""
