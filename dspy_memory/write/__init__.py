"""The write path: messages to episodes, the write program's operations validated and applied in one transaction, claims and the background writer."""
