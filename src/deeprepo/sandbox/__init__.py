"""The sandbox kernel: root code runs in a child process, never in deeprepo."""
