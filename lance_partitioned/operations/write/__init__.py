"""The write pipeline: input conformed, rows split by partition and buffered, Lance
files written, then published (or abandoned); deletes by filter."""
