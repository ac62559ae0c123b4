#!/usr/bin/env bash
# Device run 133 (H200): L2 sectors of cp.async into padded vs unpadded/swizzled smem rows (ldgsts_probe2.cu).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r133; mkdir -p $R
nvcc -O3 -arch=sm_90a -std=c++17 -o /tmp/probe2 tmp_exp/ldgsts_probe2.cu || exit 1
/tmp/probe2 | tee $R/probe.txt
/tmp/probe2 | tee -a $R/probe.txt
M=lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_requests_srcunit_tex_op_read.sum,dram__bytes_read.sum,gpu__time_duration.sum
for v in "128, 128, 0" "128, 144, 0" "128, 144, 1" "128, 128, 3" "128, 128, 2" "256, 272, 1" "256, 256, 3" "256, 256, 0"; do
  echo "== readk<$v>" >> $R/ncu.txt
  timeout 60 ncu -k "regex:readk<$v>" -c 1 --metrics $M /tmp/probe2 2>&1 | grep -E "lts__|dram__|gpu__time|ERR" >> $R/ncu.txt
done
cat $R/ncu.txt
timeout 60 ncu -k "regex:readk<128, 144, 1>" -c 1 --metrics l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum /tmp/probe2 2>&1 | tail -5 | tee $R/ncu_l1.txt
timeout 60 ncu -k "regex:readk<128, 128, 3>" -c 1 --metrics l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum /tmp/probe2 2>&1 | tail -5 | tee -a $R/ncu_l1.txt
cp tmp_exp/r133.sh tmp_exp/ldgsts_probe2.cu $R/
echo "total $((SECONDS-S)) s"
