from ascend_doctor.cli import main

main()
