#!/usr/bin/env bash
# Device run 132 (H200): L2 sectors of cp.async 16-byte pieces of token-major rows (ldgsts_probe.cu).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r132; mkdir -p $R
nvcc -O3 -arch=sm_90a -std=c++17 -o /tmp/ldgsts_probe tmp_exp/ldgsts_probe.cu || exit 1
/tmp/ldgsts_probe | tee $R/probe.txt
timeout 120 ncu --launch-skip 1 --launch-count 1 -k regex:readk --metrics \
  lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_requests_srcunit_tex_op_read.sum,dram__bytes_read.sum,gpu__time_duration.sum,smsp__sass_inst_executed_op_ldgsts.sum,smsp__sass_inst_executed_op_global_ld.sum \
  /tmp/ldgsts_probe > $R/ncu1.txt 2>&1
for s in 7 13 19; do timeout 60 ncu --launch-skip $s --launch-count 1 -k regex:readk --metrics \
  lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_requests_srcunit_tex_op_read.sum,dram__bytes_read.sum,gpu__time_duration.sum \
  /tmp/ldgsts_probe >> $R/ncu1.txt 2>&1; done
grep -E "readk|lts__|dram__|gpu__time" $R/ncu1.txt | cut -c1-120
cp tmp_exp/r132.sh tmp_exp/ldgsts_probe.cu $R/
