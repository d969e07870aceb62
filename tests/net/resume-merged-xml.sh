#!/bin/bash
# resume-merged.sh with the merged views in XML (iofs-run --xml): three
# kill -9 and a SIGTERM, and each rank's bytes exactly once in the XML
# view, every element whole, cont="1" where a line goes on.
MERGED_XML=1 exec bash "$IOFS_SOURCE_DIR/tests/net/resume-merged.sh"
