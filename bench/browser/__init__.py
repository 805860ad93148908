"""The web target: the JS reference agent (web/) in pages of a headless Chromium, reached over WebSockets."""
