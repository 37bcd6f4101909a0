"""Pure decisions: quota tree math, flavor assignment, admission order. No I/O, no asyncio."""
