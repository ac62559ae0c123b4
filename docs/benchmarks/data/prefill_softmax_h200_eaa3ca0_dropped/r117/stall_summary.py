import csv,sys,collections
f=sys.argv[1]
rows=list(csv.reader(open(f)))
hdr=rows[1]; data=rows[2:]
ix={h:i for i,h in enumerate(hdr)}
reasons=[h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
tot=collections.Counter(); byop=collections.Counter(); opreason=collections.defaultdict(collections.Counter)
allS=0; insts=[]
for r in data:
    if len(r)<len(hdr): continue
    src=r[ix['Source']].strip(); op=src.split()[0] if src else ''
    if op.startswith('@'): op=src.split()[1]
    opb=op.split('.')[0]
    s=int(r[ix['Warp Stall Sampling (All Samples)']] or 0); allS+=s
    byop[opb]+=s
    for h in reasons:
        v=int(r[ix[h]] or 0); tot[h]+=v; opreason[opb][h]+=v
    insts.append((s,r[ix['Address']],src,{h:int(r[ix[h]] or 0) for h in reasons}))
print('total samples',allS)
for h,v in tot.most_common(12): print(f'{h:24s} {v/allS:6.3f}')
print('-- by opcode (samples share, top reasons)')
for op,v in byop.most_common(15):
    top=', '.join(f'{h[6:]} {c/allS:.3f}' for h,c in opreason[op].most_common(3))
    print(f'{op:12s} {v/allS:6.3f}  {top}')
print('-- top instructions')
for s,a,src,d in sorted(insts,reverse=True)[:30]:
    top=', '.join(f'{h[6:]} {c}' for h,c in sorted(d.items(),key=lambda x:-x[1])[:3] if c)
    print(f'{s/allS:6.3f} {a} {src[:70]:70s} {top}')
