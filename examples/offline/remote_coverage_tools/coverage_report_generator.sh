#!/bin/sh
echo "coverage_report_generator: offline stand-in, no coverage report produced" >&2
exit 0
